#pragma once
// The machine's memory as the engine sees it: what is still available (so that a request that cannot fit is
// refused with a message rather than attempted), and sizes written for people.
#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <vector>

namespace strata {

// MemAvailable from /proc/meminfo (memory that can be given out without swapping), else the physical memory.
uint64_t host_memory_available();

// "1.25 GiB", "512.0 MiB", "96.0 KiB", "17 bytes".
std::string format_bytes(uint64_t bytes);

// Storage that starts on a 64-byte boundary, for the buffers kernels read with 32- and 64-byte loads. glibc puts
// a large block 16 bytes past a page boundary, where every second 32-byte load straddles two cache lines (the
// integer-dot prefill kernels were 8-15% slower for it, measured in docs/performance.md).
template <typename T>
struct CacheLineAllocator {
    using value_type = T;
    CacheLineAllocator() = default;
    template <typename U>
    CacheLineAllocator(const CacheLineAllocator<U>&) {}
    T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{64})); }
    void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t{64}); }
    friend bool operator==(const CacheLineAllocator&, const CacheLineAllocator&) { return true; }
};
template <typename T>
using CacheLineVector = std::vector<T, CacheLineAllocator<T>>;

// Anonymous memory for large data read as streams (the CPU backend's weights), aligned to 2 MiB and given to the
// kernel as wanting transparent huge pages (madvise): a stream then crosses a page boundary (a TLB miss, and
// where the hardware prefetcher stops) every 2 MiB instead of every 4 KiB. Where the kernel gives no huge pages
// it is ordinary memory. Zero-filled. An empty buffer when the memory cannot be had (size() == 0).
class HugePageBuffer {
public:
    HugePageBuffer() = default;
    explicit HugePageBuffer(uint64_t bytes);
    ~HugePageBuffer() { release(); }
    HugePageBuffer(HugePageBuffer&& o) noexcept { *this = static_cast<HugePageBuffer&&>(o); }
    HugePageBuffer& operator=(HugePageBuffer&& o) noexcept;
    HugePageBuffer(const HugePageBuffer&) = delete;
    HugePageBuffer& operator=(const HugePageBuffer&) = delete;

    std::byte* data() const { return data_; }
    uint64_t size() const { return size_; }
    // Bytes of this buffer the kernel backs with huge pages now (from /proc/self/smaps; 0 when unknown).
    uint64_t huge_bytes() const;

private:
    void release();
    void* map_ = nullptr;  // the mapping (2 MiB more than asked, for the alignment)
    uint64_t map_bytes_ = 0;
    std::byte* data_ = nullptr;
    uint64_t size_ = 0;
};

}  // namespace strata
