#pragma once
// Device-local memory in a few large blocks: each block is one VkDeviceMemory of one memory type, and buffers
// get aligned ranges of it (first fit, freed ranges merged with their neighbours). A driver may limit the number
// of allocations (maxMemoryAllocationCount, 4096 on many) and each one costs a kernel call and page-table work,
// so a model's hundreds of buffers share a few blocks. Blocks grow from 16 MiB to 256 MiB as more are needed; a
// block whose last range is freed goes back to the driver. Buffers bigger than half a block get memory of their
// own (Buffer), as does everything host-visible (staging, results, the fallback when device memory is full).
// Owned by the Context, which frees it before the device; every range must be freed before it.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include <vulkan/vulkan.h>

namespace strata::vk {

class MemoryPool {
public:
    struct Range {
        VkDeviceMemory memory = VK_NULL_HANDLE;
        uint64_t offset = 0;
        uint64_t size = 0;
    };
    static constexpr uint64_t kFirstBlock = 16ull << 20;
    static constexpr uint64_t kMaxBlock = 256ull << 20;

    // max_allocation: the most one VkDeviceMemory may hold on this device.
    MemoryPool(VkDevice device, uint64_t max_allocation);
    ~MemoryPool();
    MemoryPool(const MemoryPool&) = delete;
    MemoryPool& operator=(const MemoryPool&) = delete;

    // Requests up to this size are served from blocks.
    uint64_t max_pooled() const { return max_block_ / 2; }
    // A range for `req` in memory type `type`: from a block that has room, or from a new block when
    // may_grow(block bytes) allows it. nullopt when it does not, or when the driver refuses the block (the caller
    // then allocates on its own, or goes to host-visible memory).
    std::optional<Range> allocate(const VkMemoryRequirements& req, uint32_t type,
                                  const std::function<bool(uint64_t)>& may_grow);
    void free(const Range& r);

    uint64_t bytes() const { return bytes_; }  // in blocks now
    size_t blocks() const { return blocks_.size(); }

private:
    struct Block {
        VkDeviceMemory memory = VK_NULL_HANDLE;
        uint32_t type = 0;
        uint64_t size = 0;
        uint64_t used = 0;
        std::map<uint64_t, uint64_t> free;  // offset -> bytes, disjoint and not touching
    };
    static std::optional<uint64_t> carve(Block& b, uint64_t size, uint64_t alignment);
    VkDevice device_ = VK_NULL_HANDLE;
    uint64_t max_block_ = kMaxBlock;
    std::vector<Block> blocks_;
    uint64_t bytes_ = 0;
};

}  // namespace strata::vk
