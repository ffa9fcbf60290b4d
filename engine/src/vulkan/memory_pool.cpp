#include "vulkan/memory_pool.hpp"

#include <algorithm>

#include "vulkan/vk_check.hpp"

namespace strata::vk {

MemoryPool::MemoryPool(VkDevice device, uint64_t max_allocation)
    : device_(device), max_block_(std::min(kMaxBlock, max_allocation)) {}

MemoryPool::~MemoryPool() {
    for (Block& b : blocks_) vkFreeMemory(device_, b.memory, nullptr);
}

std::optional<uint64_t> MemoryPool::carve(Block& b, uint64_t size, uint64_t alignment) {
    for (auto it = b.free.begin(); it != b.free.end(); ++it) {
        const uint64_t start = it->first, end = it->first + it->second;
        const uint64_t at = (start + alignment - 1) / alignment * alignment;
        if (at + size > end) continue;
        b.free.erase(it);
        if (at > start) b.free.emplace(start, at - start);  // the alignment gap stays free
        if (at + size < end) b.free.emplace(at + size, end - (at + size));
        b.used += size;
        return at;
    }
    return std::nullopt;
}

std::optional<MemoryPool::Range> MemoryPool::allocate(const VkMemoryRequirements& req, uint32_t type,
                                                      const std::function<bool(uint64_t)>& may_grow) {
    if (req.size > max_pooled() || !(req.memoryTypeBits & (1u << type))) return std::nullopt;
    const uint64_t alignment = std::max<uint64_t>(req.alignment, 16);
    for (Block& b : blocks_) {
        if (b.type != type) continue;
        if (const auto at = carve(b, req.size, alignment)) return Range{b.memory, *at, req.size};
    }
    // A new block, twice the size of the last of this type (a small model stays in a small block).
    uint64_t size = kFirstBlock;
    for (const Block& b : blocks_)
        if (b.type == type) size = std::max(size, 2 * b.size);
    size = std::max(std::min(size, max_block_), req.size);
    if (!may_grow(size)) return std::nullopt;
    auto mai = make<VkMemoryAllocateInfo>(VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO);
    mai.allocationSize = size;
    mai.memoryTypeIndex = type;
    Block b;
    if (vkAllocateMemory(device_, &mai, nullptr, &b.memory) != VK_SUCCESS) return std::nullopt;
    b.type = type;
    b.size = size;
    b.free.emplace(0, size);
    const uint64_t at = *carve(b, req.size, alignment);  // an empty block of at least req.size: offset 0
    blocks_.push_back(std::move(b));
    bytes_ += size;
    return Range{blocks_.back().memory, at, req.size};
}

void MemoryPool::free(const Range& r) {
    auto it = std::find_if(blocks_.begin(), blocks_.end(), [&](const Block& b) { return b.memory == r.memory; });
    if (it == blocks_.end() || r.size == 0) return;
    Block& b = *it;
    b.used -= r.size;
    if (b.used == 0) {
        // Nothing left in it: the memory goes back to the driver.
        vkFreeMemory(device_, b.memory, nullptr);
        bytes_ -= b.size;
        blocks_.erase(it);
        return;
    }
    uint64_t start = r.offset, end = r.offset + r.size;
    auto next = b.free.lower_bound(start);
    if (next != b.free.end() && next->first == end) {  // merge with the free range after
        end += next->second;
        next = b.free.erase(next);
    }
    if (next != b.free.begin()) {  // and with the one before
        auto prev = std::prev(next);
        if (prev->first + prev->second == start) {
            start = prev->first;
            b.free.erase(prev);
        }
    }
    b.free.emplace(start, end - start);
}

}  // namespace strata::vk
