#pragma once
// Catch2 v2 (Debian 12) or v3 (Debian 13, Ubuntu 24.04): the major version CMake found (STRATA_CATCH2_MAJOR), so
// that a machine with both (v3 installed, v2 in a bundle, as on a bare GPU machine) compiles against the one linked.
#if defined(STRATA_CATCH2_MAJOR)
#if STRATA_CATCH2_MAJOR >= 3
#define STRATA_CATCH3 1
#endif
#elif __has_include(<catch2/catch_all.hpp>)
#define STRATA_CATCH3 1
#endif
#ifdef STRATA_CATCH3
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
