#include "strata/host_memory.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include <sys/mman.h>
#include <unistd.h>

namespace strata {

uint64_t host_memory_available() {
    std::ifstream in("/proc/meminfo");
    std::string key;
    uint64_t kib = 0;
    std::string unit;
    while (in >> key >> kib >> unit)
        if (key == "MemAvailable:") return kib * 1024;
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : UINT64_MAX;
}

std::string format_bytes(uint64_t bytes) {
    char buf[64];
    const double b = static_cast<double>(bytes);
    if (bytes >= (1ull << 30))
        std::snprintf(buf, sizeof buf, "%.2f GiB", b / double(1ull << 30));
    else if (bytes >= (1ull << 20))
        std::snprintf(buf, sizeof buf, "%.1f MiB", b / double(1ull << 20));
    else if (bytes >= (1ull << 10))
        std::snprintf(buf, sizeof buf, "%.1f KiB", b / double(1ull << 10));
    else
        std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(bytes));
    return buf;
}

HugePageBuffer::HugePageBuffer(uint64_t bytes) {
    constexpr uint64_t kHuge = 2ull << 20;
    if (bytes == 0) return;
    const uint64_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
    void* m =
        ::mmap(nullptr, rounded + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return;
    map_ = m;
    map_bytes_ = rounded + kHuge;
    const auto at = (reinterpret_cast<uintptr_t>(m) + kHuge - 1) / kHuge * kHuge;
    data_ = reinterpret_cast<std::byte*>(at);
    size_ = bytes;
#ifdef MADV_HUGEPAGE
    ::madvise(data_, rounded, MADV_HUGEPAGE);  // a hint: refused (THP off) leaves ordinary pages
#endif
}

HugePageBuffer& HugePageBuffer::operator=(HugePageBuffer&& o) noexcept {
    if (this != &o) {
        release();
        map_ = o.map_;
        map_bytes_ = o.map_bytes_;
        data_ = o.data_;
        size_ = o.size_;
        o.map_ = nullptr;
        o.map_bytes_ = 0;
        o.data_ = nullptr;
        o.size_ = 0;
    }
    return *this;
}

void HugePageBuffer::release() {
    if (map_) ::munmap(map_, map_bytes_);
    map_ = nullptr;
    map_bytes_ = 0;
    data_ = nullptr;
    size_ = 0;
}

uint64_t HugePageBuffer::huge_bytes() const {
    if (!map_) return 0;
    // The mapping's block in smaps: a header line "start-end perms ...", then "AnonHugePages: N kB".
    std::ifstream in("/proc/self/smaps");
    std::string line;
    const auto start = reinterpret_cast<uintptr_t>(map_);
    bool ours = false;
    while (std::getline(in, line)) {
        unsigned long long a = 0, b = 0;
        if (std::sscanf(line.c_str(), "%llx-%llx ", &a, &b) == 2 && line.find(':') > line.find(' ')) {
            ours = a <= start && start < b;
            continue;
        }
        unsigned long long kib = 0;
        // The mapping's huge pages also cover the rounding past size(): count no more than the buffer.
        if (ours && std::sscanf(line.c_str(), "AnonHugePages: %llu kB", &kib) == 1)
            return std::min<uint64_t>(kib * 1024, size_);
    }
    return 0;
}

}  // namespace strata
