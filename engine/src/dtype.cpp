#include "strata/dtype.hpp"

#include <bit>
#include <cmath>
#include <cstring>

#include <glm/gtc/packing.hpp>

#include "strata/error.hpp"

namespace strata {

std::string_view dtype_name(DType t) {
    switch (t) {
        case DType::F32: return "F32";
        case DType::F16: return "F16";
        case DType::BF16: return "BF16";
        case DType::Q8_0: return "Q8_0";
        case DType::Q4_0: return "Q4_0";
        case DType::Q4_K: return "Q4_K";
        case DType::Q5_K: return "Q5_K";
        case DType::Q6_K: return "Q6_K";
    }
    return "?";
}

bool dtype_is_block(DType t) { return dtype_block_size(t) > 1; }

int64_t dtype_block_size(DType t) {
    switch (t) {
        case DType::F32:
        case DType::F16:
        case DType::BF16: return 1;
        case DType::Q8_0:
        case DType::Q4_0: return 32;
        case DType::Q4_K:
        case DType::Q5_K:
        case DType::Q6_K: return 256;
    }
    return 1;
}

// Block layouts as ggml defines them (ggml-common.h): scales are f16.
int64_t dtype_block_bytes(DType t) {
    switch (t) {
        case DType::F32: return 4;
        case DType::F16:
        case DType::BF16: return 2;
        case DType::Q8_0: return 2 + 32;                  // d, qs[32]
        case DType::Q4_0: return 2 + 16;                  // d, qs[16]
        case DType::Q4_K: return 2 + 2 + 12 + 128;        // d, dmin, scales[12], qs[128]
        case DType::Q5_K: return 2 + 2 + 12 + 32 + 128;   // d, dmin, scales[12], qh[32], qs[128]
        case DType::Q6_K: return 128 + 64 + 16 + 2;       // ql[128], qh[64], scales[16], d
    }
    return 0;
}

uint64_t dtype_bytes(DType t, int64_t n) {
    int64_t bs = dtype_block_size(t);
    return static_cast<uint64_t>((n + bs - 1) / bs) * static_cast<uint64_t>(dtype_block_bytes(t));
}

float f16_to_f32(uint16_t h) { return glm::unpackHalf1x16(h); }

float bf16_to_f32(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

// By integer arithmetic (glm::packHalf1x16 rounds ties away from zero; F16C and llama.cpp round them to even),
// as shaders/pack_f16.comp does.
uint16_t f32_to_f16(float f) {
    const uint32_t x = std::bit_cast<uint32_t>(f), sign = (x >> 16) & 0x8000u, a = x & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u);  // NaN
    if (a >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // 65520 and beyond round to infinity
    if (a < 0x38800000u)  // below the smallest normal: subnormal units of 2^-24 (the product is exact)
        return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(std::bit_cast<float>(a) * 0x1p24f)));
    const uint32_t r = a - 0x38000000u;  // the exponent's bias 127 -> 15
    return static_cast<uint16_t>(sign | ((r + 0x0FFFu + ((r >> 13) & 1u)) >> 13));  // 23 -> 10 bits, ties to even
}

uint16_t f32_to_f16_saturating(float f) {
    if (std::isfinite(f) && std::fabs(f) >= 65520.0f) return f < 0 ? 0xFBFF : 0x7BFF;
    return f32_to_f16(f);
}

uint16_t f32_to_bf16(float f) {
    uint32_t u = std::bit_cast<uint32_t>(f);
    if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);  // keep it a quiet NaN
    uint32_t rounding = 0x7fff + ((u >> 16) & 1);
    return static_cast<uint16_t>((u + rounding) >> 16);
}

}  // namespace strata
