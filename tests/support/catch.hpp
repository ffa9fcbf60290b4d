#pragma once
// Catch2 v2 (Debian 12) or v3 (Debian 13, Ubuntu 24.04).
#if __has_include(<catch2/catch_all.hpp>)
#include <catch2/catch_all.hpp>
#else
#include <catch2/catch.hpp>
#endif
