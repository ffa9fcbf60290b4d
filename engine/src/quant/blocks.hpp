#pragma once
// One block of each ggml type decoded to float32 (layouts and arithmetic: strata/quant.hpp). Inline so that the
// CPU kernels decode a block into registers / L1 right before using it, never a whole weight.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace strata::quant::blocks {

inline constexpr int64_t kQK = 256;  // weights per K-type super-block
inline constexpr int64_t kQ0 = 32;   // weights per Q8_0 / Q4_0 block

inline uint16_t load_u16(const uint8_t* p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;  // GGUF is little-endian, and so are the targets we build for
}

// binary16 -> binary32, exact: the exponent and mantissa bits are moved into a float's and rescaled by 2^112
// (a power of two, so exact; f16 subnormals land in float's normal range). Inf/NaN keep an all-ones exponent.
inline float half(const uint8_t* p) {
    const uint32_t h = load_u16(p);
    const uint32_t sign = (h & 0x8000u) << 16;
    const uint32_t em = h & 0x7fffu;
    if (em >= 0x7c00u) return std::bit_cast<float>(sign | 0x7f800000u | ((em & 0x3ffu) << 13));
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(std::bit_cast<float>(em << 13) * 0x1p112f));
}

// Q4_K / Q5_K: the 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes.
inline void scale_min(const uint8_t* s, int j, int& sc, int& m) {
    if (j < 4) {
        sc = s[j] & 63;
        m = s[j + 4] & 63;
    } else {
        sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
        m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

inline void decode_q8_0(const uint8_t* b, float* y) {  // 32 weights
    const float d = half(b);
    const auto* qs = reinterpret_cast<const int8_t*>(b + 2);
    for (int i = 0; i < 32; ++i) y[i] = d * static_cast<float>(qs[i]);
}

inline void decode_q4_0(const uint8_t* b, float* y) {  // 32 weights
    const float d = half(b);
    const uint8_t* qs = b + 2;
    for (int j = 0; j < 16; ++j) {
        y[j] = d * static_cast<float>((qs[j] & 0x0f) - 8);
        y[j + 16] = d * static_cast<float>((qs[j] >> 4) - 8);
    }
}

inline void decode_q4_k(const uint8_t* b, float* y) {  // 256 weights
    const float d = half(b), dmin = half(b + 2);
    const uint8_t* scales = b + 4;
    const uint8_t* qs = b + 16;
    for (int c = 0; c < 4; ++c) {
        int sc0, m0, sc1, m1;
        scale_min(scales, 2 * c, sc0, m0);
        scale_min(scales, 2 * c + 1, sc1, m1);
        const float d0 = d * static_cast<float>(sc0), n0 = dmin * static_cast<float>(m0);
        const float d1 = d * static_cast<float>(sc1), n1 = dmin * static_cast<float>(m1);
        const uint8_t* q = qs + 32 * c;
        float* o = y + 64 * c;
        for (int l = 0; l < 32; ++l) {
            o[l] = d0 * static_cast<float>(q[l] & 0x0f) - n0;
            o[l + 32] = d1 * static_cast<float>(q[l] >> 4) - n1;
        }
    }
}

inline void decode_q5_k(const uint8_t* b, float* y) {  // 256 weights
    const float d = half(b), dmin = half(b + 2);
    const uint8_t* scales = b + 4;
    const uint8_t* qh = b + 16;
    const uint8_t* qs = b + 48;
    for (int c = 0; c < 4; ++c) {
        int sc0, m0, sc1, m1;
        scale_min(scales, 2 * c, sc0, m0);
        scale_min(scales, 2 * c + 1, sc1, m1);
        const float d0 = d * static_cast<float>(sc0), n0 = dmin * static_cast<float>(m0);
        const float d1 = d * static_cast<float>(sc1), n1 = dmin * static_cast<float>(m1);
        const uint8_t* q = qs + 32 * c;
        float* o = y + 64 * c;
        for (int l = 0; l < 32; ++l) {
            const int lo = (q[l] & 0x0f) | (((qh[l] >> (2 * c)) & 1) << 4);
            const int hi = (q[l] >> 4) | (((qh[l] >> (2 * c + 1)) & 1) << 4);
            o[l] = d0 * static_cast<float>(lo) - n0;
            o[l + 32] = d1 * static_cast<float>(hi) - n1;
        }
    }
}

inline void decode_q6_k(const uint8_t* b, float* y) {  // 256 weights
    const uint8_t* ql = b;
    const uint8_t* qh = b + 128;
    const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
    const float d = half(b + 208);
    for (int h = 0; h < 2; ++h) {
        const uint8_t* l4 = ql + 64 * h;
        const uint8_t* h2 = qh + 32 * h;
        const int8_t* s = sc + 8 * h;
        float* o = y + 128 * h;
        for (int is = 0; is < 2; ++is) {  // 16 weights per scale: the scales are loop-invariant below
            const float s1 = d * static_cast<float>(s[is]), s2 = d * static_cast<float>(s[is + 2]);
            const float s3 = d * static_cast<float>(s[is + 4]), s4 = d * static_cast<float>(s[is + 6]);
            for (int l = 16 * is; l < 16 * is + 16; ++l) {
                const int q1 = ((l4[l] & 0x0f) | (((h2[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((l4[l + 32] & 0x0f) | (((h2[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((l4[l] >> 4) | (((h2[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((l4[l + 32] >> 4) | (((h2[l] >> 6) & 3) << 4)) - 32;
                o[l] = s1 * static_cast<float>(q1);
                o[l + 32] = s2 * static_cast<float>(q2);
                o[l + 64] = s3 * static_cast<float>(q3);
                o[l + 96] = s4 * static_cast<float>(q4);
            }
        }
    }
}

}  // namespace strata::quant::blocks
