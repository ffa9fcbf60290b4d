#pragma once
// The Vulkan context: instance (+ the validation layer's messenger when asked), the chosen physical device,
// the logical device with one compute queue, and one command pool. Everything else (buffers, kernels,
// sequences) borrows it and must be destroyed before it; the backend declares it first so it dies last.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <vulkan/vulkan.h>

#include "strata/vulkan.hpp"
#include "memory_pool.hpp"     // beside this header (the tests include it by path)
#include "pipeline_cache.hpp"  // beside this header (the tests include it by path)

namespace strata::vk {

struct ContextOptions {
    int device_index = -1;           // < 0: the best device (discrete > integrated > virtual > cpu)
    bool validation = false;         // VK_LAYER_KHRONOS_validation with a messenger recording every message
    uint64_t max_binding_range = 0;  // tests: pretend maxStorageBufferRange is this small (0 = the device's)
    std::string pipeline_cache_folder = PipelineCache::default_folder();  // "" = compiled pipelines not kept
    uint64_t device_local_limit = 0;  // tests: pretend device-local memory holds only this many bytes (0 = heap)
};

// An instance, with the validation layer and its messenger when asked. Used alone to list devices.
class Instance {
public:
    explicit Instance(bool validation);
    ~Instance();
    Instance(const Instance&) = delete;
    Instance& operator=(const Instance&) = delete;

    VkInstance handle() const { return instance_; }
    std::vector<VkPhysicalDevice> physical_devices() const;

private:
    VkInstance instance_ = VK_NULL_HANDLE;
    VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
};

// What a physical device offers, and whether Strata can run on it.
VulkanDeviceInfo describe_device(VkInstance instance, VkPhysicalDevice pd, int index);
// Bytes of shared memory matmul_coopmat.comp declares (binary16 slices of x and w, a result matrix per subgroup).
inline constexpr uint32_t kCoopmatSharedBytes = (64 + 128) * 5 * 16 + 4 * 256 * 4;
// The index the backend picks when no --device is given, or -1 when no device is usable.
int best_device(const std::vector<VulkanDeviceInfo>& devices);

class Context {
public:
    explicit Context(const ContextOptions& options);
    ~Context();
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;

    VkInstance instance() const { return instance_->handle(); }
    VkPhysicalDevice physical() const { return physical_; }
    VkDevice device() const { return device_; }
    VkQueue queue() const { return queue_; }
    uint32_t queue_family() const { return queue_family_; }
    VkCommandPool command_pool() const { return command_pool_; }
    PipelineCache& pipeline_cache() { return *pipeline_cache_; }
    const VkPhysicalDeviceLimits& limits() const { return properties_.limits; }
    const VulkanDeviceInfo& info() const { return info_; }
    // Why the prefill matmul cannot use matrix units although the device listed them ("" when nothing refused).
    const std::string& coopmat_note() const { return coopmat_note_; }
    bool validation() const { return validation_; }

    // The largest range one storage-buffer binding may cover: maxStorageBufferRange, or the tests' smaller
    // override, and never more than one allocation may hold. A multiple of 256 bytes.
    uint64_t max_binding_range() const { return max_binding_range_; }
    uint64_t max_allocation() const { return max_allocation_; }  // min(maxMemoryAllocationSize, maxBufferSize)
    uint64_t offset_alignment() const { return properties_.limits.minStorageBufferOffsetAlignment; }
    uint32_t max_groups_x() const { return properties_.limits.maxComputeWorkGroupCount[0]; }
    uint32_t max_groups_y() const { return properties_.limits.maxComputeWorkGroupCount[1]; }
    bool has_timestamps() const { return timestamp_bits_ > 0; }
    double timestamp_period_ns() const { return properties_.limits.timestampPeriod; }

    // A memory type among type_bits that has every `required` flag, preferring more `preferred` flags and
    // fewer `avoided` ones; nullopt when none qualifies.
    std::optional<uint32_t> find_memory_type(uint32_t type_bits, VkMemoryPropertyFlags required,
                                             VkMemoryPropertyFlags preferred, VkMemoryPropertyFlags avoided) const;
    const VkPhysicalDeviceMemoryProperties& memory_properties() const { return memory_; }
    uint64_t heap_size_of_type(uint32_t type) const;

    // A CPU device (lavapipe) allocates "device" memory from ordinary RAM and reports a nominal heap size, so
    // the heap is no limit to check against there; the allocation itself still fails when RAM runs out.
    bool heap_is_advisory() const { return info_.type == "cpu"; }

    // Bytes of device memory Strata holds now (for out-of-memory messages): the pool's blocks and the buffers
    // with memory of their own.
    uint64_t allocated_bytes() const { return allocated_ + pool_->bytes(); }
    void note_allocated(uint64_t bytes) { allocated_ += bytes; }
    void note_freed(uint64_t bytes) { allocated_ -= bytes; }
    // Device-local memory shared by most buffers (memory_pool.hpp).
    MemoryPool& pool() { return *pool_; }
    // Live VkDeviceMemory objects (the pool's blocks, and every buffer with memory of its own) and VkBuffers.
    uint64_t memory_objects() const { return own_memory_ + pool_->blocks(); }
    uint64_t buffers() const { return buffers_; }
    void note_buffer(int delta, bool own_memory) {
        buffers_ = uint64_t(int64_t(buffers_) + delta);
        if (own_memory) own_memory_ = uint64_t(int64_t(own_memory_) + delta);
    }
    // Device-local memory Strata may use: the heap, or the tests' smaller limit (which applies even where the
    // heap is advisory). A buffer that does not fit goes to host-visible memory instead (Buffer).
    uint64_t device_local_limit() const { return device_local_limit_; }
    bool device_local_limited() const { return device_local_limit_ > 0; }
    // Bytes of "device-local" buffers that live in host-visible memory because device-local memory was full
    // (an integrated GPU's small carve-out, a discrete GPU's full VRAM): read over the bus, but there.
    uint64_t spilled_bytes() const { return spilled_; }
    void note_spilled(int64_t bytes) { spilled_ = uint64_t(int64_t(spilled_) + bytes); }
    // The largest host-visible heap that is not device-local (where spilled buffers go on a discrete GPU).
    uint64_t host_visible_heap() const;

private:
    std::unique_ptr<Instance> instance_;
    VkPhysicalDevice physical_ = VK_NULL_HANDLE;
    VkPhysicalDeviceProperties properties_{};
    VkPhysicalDeviceMemoryProperties memory_{};
    VulkanDeviceInfo info_;
    std::string coopmat_note_;
    VkDevice device_ = VK_NULL_HANDLE;
    VkQueue queue_ = VK_NULL_HANDLE;
    uint32_t queue_family_ = 0;
    uint32_t timestamp_bits_ = 0;
    VkCommandPool command_pool_ = VK_NULL_HANDLE;
    std::unique_ptr<PipelineCache> pipeline_cache_;  // saved and destroyed before the device
    std::unique_ptr<MemoryPool> pool_;               // freed before the device
    bool validation_ = false;
    uint64_t max_binding_range_ = 0;
    uint64_t max_allocation_ = 0;
    uint64_t allocated_ = 0;
    uint64_t device_local_limit_ = 0;
    uint64_t spilled_ = 0;
    uint64_t buffers_ = 0, own_memory_ = 0;
};

// Whether STRATA_VK_VALIDATION asks for the validation layer ("1", "true", "on").
bool validation_from_env();

}  // namespace strata::vk
