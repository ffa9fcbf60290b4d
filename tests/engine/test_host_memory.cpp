// The engine's own memory helpers (strata/host_memory.hpp).
#include <algorithm>
#include <cstdint>

#include "catch.hpp"
#include "strata/host_memory.hpp"

using namespace strata;

TEST_CASE("huge-page buffers: aligned to 2 MiB, zero-filled, moved without copying", "[memory]") {
    HugePageBuffer empty;
    CHECK(empty.size() == 0);
    CHECK(empty.huge_bytes() == 0);
    HugePageBuffer a(3 << 20);
    REQUIRE(a.size() == (3u << 20));
    CHECK(reinterpret_cast<uintptr_t>(a.data()) % (2u << 20) == 0);
    CHECK(std::all_of(a.data(), a.data() + a.size(), [](std::byte b) { return b == std::byte{0}; }));
    a.data()[a.size() - 1] = std::byte{7};
    std::byte* at = a.data();
    HugePageBuffer b = std::move(a);
    CHECK(a.size() == 0);
    CHECK(b.data() == at);
    CHECK(b.data()[b.size() - 1] == std::byte{7});
    CHECK(b.huge_bytes() <= b.size());
}
