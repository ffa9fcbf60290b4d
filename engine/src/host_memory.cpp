#include "strata/host_memory.hpp"

#include <cstdio>
#include <fstream>
#include <string>

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

}  // namespace strata
