#pragma once
// The three nouns of GPU work, each a move-only owner of its Vulkan handles (destroyed with it):
//   Buffer   - a VkBuffer and the memory behind it: a range of one of the context's pooled device-local blocks
//              (memory_pool.hpp), or a VkDeviceMemory of its own (big buffers, host-visible and mapped ones)
//   Kernel   - one compute shader variant: shader module, descriptor set layout, pipeline layout, pipeline
//   Sequence - a command buffer and the fence that says it has finished
// plus DescriptorArena, the descriptor sets of one step (reset together when the next step begins).
// All of them borrow the Context, which must outlive them.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <vulkan/vulkan.h>

#include "vulkan/context.hpp"

namespace strata::vk {

enum class Memory {
    DeviceLocal,  // weights, activations, KV cache: only the GPU touches them (host-visible memory when full)
    Upload,       // host-visible, coherent, mapped: staging for uploads, the tokens of a step
    Readback,     // host-visible, cached where possible, mapped: results copied back after a step
};

class Buffer {
public:
    Buffer() = default;
    // Throws DeviceError naming `what` and the size when the memory is not there.
    Buffer(Context& ctx, uint64_t bytes, Memory memory, const std::string& what);
    ~Buffer() { release(); }
    Buffer(Buffer&& o) noexcept { *this = std::move(o); }
    Buffer& operator=(Buffer&& o) noexcept;
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;

    VkBuffer handle() const { return buffer_; }
    uint64_t size() const { return size_; }
    std::byte* mapped() const { return mapped_; }  // null for device-local memory
    explicit operator bool() const { return buffer_ != VK_NULL_HANDLE; }
    // Makes device writes visible to the host when the memory is not coherent (after the fence).
    void invalidate();

private:
    void release();
    Context* ctx_ = nullptr;
    VkBuffer buffer_ = VK_NULL_HANDLE;
    VkDeviceMemory memory_ = VK_NULL_HANDLE;  // its own; or the pool's block that `pooled_` is a range of
    MemoryPool::Range pooled_;
    uint64_t size_ = 0;        // usable bytes
    uint64_t allocation_ = 0;  // device-local bytes behind them (counted in the context's tally)
    uint64_t spilled_ = 0;     // or: bytes of a device-local buffer placed in host-visible memory (the context's too)
    std::byte* mapped_ = nullptr;
    bool coherent_ = true;
};

struct KernelSpec {
    std::string variant;              // the SPIR-V variant (shaders/variants.cmake)
    uint32_t buffers = 0;             // storage buffers at bindings 0 .. buffers-1
    uint32_t push_bytes = 0;          // size of the push-constant block
    std::vector<uint32_t> constants;  // specialization constants: constant_id i takes constants[i]
};

class Kernel {
public:
    Kernel() = default;
    // Throws DeviceError when the variant is not embedded or the pipeline cannot be built.
    Kernel(Context& ctx, const KernelSpec& spec);
    ~Kernel() { release(); }
    Kernel(Kernel&& o) noexcept { *this = std::move(o); }
    Kernel& operator=(Kernel&& o) noexcept;
    Kernel(const Kernel&) = delete;
    Kernel& operator=(const Kernel&) = delete;

    VkPipeline pipeline() const { return pipeline_; }
    VkPipelineLayout layout() const { return layout_; }
    VkDescriptorSetLayout set_layout() const { return set_layout_; }
    uint32_t buffers() const { return buffers_; }
    uint32_t push_bytes() const { return push_bytes_; }
    const std::string& name() const { return name_; }

private:
    void release();
    VkDevice device_ = VK_NULL_HANDLE;
    VkShaderModule module_ = VK_NULL_HANDLE;
    VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
    VkPipelineLayout layout_ = VK_NULL_HANDLE;
    VkPipeline pipeline_ = VK_NULL_HANDLE;
    uint32_t buffers_ = 0, push_bytes_ = 0;
    std::string name_;
};

class Sequence {
public:
    Sequence() = default;
    explicit Sequence(Context& ctx);
    ~Sequence() { release(); }
    Sequence(Sequence&& o) noexcept { *this = std::move(o); }
    Sequence& operator=(Sequence&& o) noexcept;
    Sequence(const Sequence&) = delete;
    Sequence& operator=(const Sequence&) = delete;

    VkCommandBuffer cmd() const { return cmds_[current_]; }
    bool recording() const { return recording_; }
    void begin();   // starts recording (abandoning an unfinished recording)
    // Ends the command buffer being recorded, submits it, and goes on recording into another, so that the
    // device runs the first part while the rest is recorded. Queue order alone does not make one part's writes
    // visible to the next: the caller's barriers do (their scopes reach across submissions on the queue).
    void flush();
    void submit();  // ends recording and submits to the queue
    // Waits on the fences of every part submitted since begin() (no-op when nothing is in flight), in slices: it
    // gives up with Cancelled once *cancel is true (the work stays in flight: begin() and the destructor wait for
    // it), and with DeviceError after kWaitLimit (a hung device; display drivers reset a GPU long before that).
    void wait(const std::atomic<bool>* cancel = nullptr);
    static constexpr std::chrono::milliseconds kWaitSlice{20};
    static constexpr std::chrono::seconds kWaitLimit{300};
    void submit_and_wait(const std::atomic<bool>* cancel = nullptr) {
        submit();
        wait(cancel);
    }

private:
    void add_buffer();  // one more command buffer and its fence
    void submit_current();
    void release();
    Context* ctx_ = nullptr;
    std::vector<VkCommandBuffer> cmds_;  // the parts of a step, recorded and submitted in order
    std::vector<VkFence> fences_;        // fences_[i] signals when cmds_[i] has run
    size_t current_ = 0;                 // the part being recorded
    size_t waited_ = 0, submitted_ = 0;  // parts [waited_, submitted_) are in flight
    bool recording_ = false;
};

// Descriptor sets for one step. Pools are added as a step needs more sets and kept for the next one.
class DescriptorArena {
public:
    DescriptorArena() = default;
    explicit DescriptorArena(Context& ctx) : ctx_(&ctx) {}
    ~DescriptorArena() { release(); }
    DescriptorArena(DescriptorArena&& o) noexcept { *this = std::move(o); }
    DescriptorArena& operator=(DescriptorArena&& o) noexcept;
    DescriptorArena(const DescriptorArena&) = delete;
    DescriptorArena& operator=(const DescriptorArena&) = delete;

    VkDescriptorSet allocate(VkDescriptorSetLayout layout);
    void reset();  // every set handed out is free again (the step that used them has finished)

private:
    void release();
    void add_pool();
    Context* ctx_ = nullptr;
    std::vector<VkDescriptorPool> pools_;
    size_t current_ = 0;
};

// A one-off command buffer for work outside a step (zeroing a new buffer, uploading weights): record into
// cmd(), then run() submits it and waits.
class OneShot {
public:
    explicit OneShot(Context& ctx) : seq_(ctx) { seq_.begin(); }
    VkCommandBuffer cmd() const { return seq_.cmd(); }
    void run() { seq_.submit_and_wait(); }

private:
    Sequence seq_;
};

}  // namespace strata::vk
