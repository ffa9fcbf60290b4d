#pragma once
// Catch2 v2 (Debian 12) or v3 (Debian 13, Ubuntu 24.04): the major version CMake found and links
// (STRATA_CATCH2_MAJOR, tests/CMakeLists.txt), not whichever headers the include path shows first: a machine may
// have both (v3 installed, v2 in the GPU machine's bundle).
#if STRATA_CATCH2_MAJOR >= 3
#include <catch2/catch_all.hpp>
#include <string>
using Catch::Approx;
namespace Catch {
// v2's name for the substring matcher (v3's Matchers::Contains matches elements of a range).
inline Matchers::StringContainsMatcher Contains(const std::string& s, CaseSensitive cs = CaseSensitive::Yes) {
    return Matchers::ContainsSubstring(s, cs);
}
}  // namespace Catch
#else
#include <catch2/catch.hpp>
#endif
