#pragma once
// The machine's memory as the engine sees it: what is still available (so that a request that cannot fit is
// refused with a message rather than attempted), and sizes written for people.
#include <cstdint>
#include <string>

namespace strata {

// MemAvailable from /proc/meminfo (memory that can be given out without swapping), else the physical memory.
uint64_t host_memory_available();

// "1.25 GiB", "512.0 MiB", "96.0 KiB", "17 bytes".
std::string format_bytes(uint64_t bytes);

}  // namespace strata
