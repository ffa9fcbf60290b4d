#pragma once
// SPIR-V of every compute shader variant, compiled by glslc at build time and embedded in the binary.
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace strata {

struct ShaderBlob {
    std::string_view name;
    std::span<const uint32_t> spirv;
};

// The SPIR-V for a variant name (see shaders/variants.cmake); empty span when there is no such variant.
std::span<const uint32_t> shader_spirv(std::string_view name);
// Every embedded variant, for listing and tests.
std::vector<ShaderBlob> all_shaders();

}  // namespace strata
