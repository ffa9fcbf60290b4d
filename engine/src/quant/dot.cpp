// sum_i w[i] * x[i] straight from the blocks, x in float32 (activations are never quantized). Each sub-block
// contributes scale * sum(q * x) - min * sum(x): the integer levels q are widened to float and multiplied with x,
// and the sub-block's scale and min are applied once per sub-block instead of once per weight. Written with GCC
// vector extensions (8 floats) and cloned for x86-64-v3 like the other CPU kernels; the result equals the dot
// of the dequantized weights up to float32 rounding (tested).
#include <cstring>

#include "quant/blocks.hpp"
#include "quant/dot.hpp"

#pragma GCC diagnostic ignored "-Wpsabi"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define STRATA_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define STRATA_SIMD_CLONES
#endif
#define STRATA_INLINE static inline __attribute__((always_inline))

namespace strata::quant::detail {

namespace {

typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef uint32_t v8u __attribute__((vector_size(32)));

STRATA_INLINE v8f load_x(const float* x) {
    v8f v;
    std::memcpy(&v, x, sizeof v);
    return v;
}
// Eight bytes widened to eight 32-bit lanes. Each 32-bit half is broadcast to four lanes and shifted by a
// per-lane count (vpsrlvd / vpsravd on AVX2): GCC lowers a direct byte-vector conversion to scalar inserts.
STRATA_INLINE v8i load_u8(const uint8_t* p) {
    uint32_t w[2];
    std::memcpy(w, p, 8);
    const v8i v = {int32_t(w[0]), int32_t(w[0]), int32_t(w[0]), int32_t(w[0]),
                   int32_t(w[1]), int32_t(w[1]), int32_t(w[1]), int32_t(w[1])};
    const v8i shift = {0, 8, 16, 24, 0, 8, 16, 24};
    return (v8i)((v8u)v >> (v8u)shift) & 255;
}
STRATA_INLINE v8i load_i8(const uint8_t* p) {
    uint32_t w[2];
    std::memcpy(w, p, 8);
    const v8i v = {int32_t(w[0]), int32_t(w[0]), int32_t(w[0]), int32_t(w[0]),
                   int32_t(w[1]), int32_t(w[1]), int32_t(w[1]), int32_t(w[1])};
    const v8i up = {24, 16, 8, 0, 24, 16, 8, 0};
    return (v8i)((v8u)v << (v8u)up) >> 24;  // the byte to the top, then an arithmetic shift back (sign)
}
STRATA_INLINE v8f to_f(v8i v) { return __builtin_convertvector(v, v8f); }
STRATA_INLINE float hsum(v8f v) {
    return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

// Q8_0: d * sum(q x) per 32.
STRATA_INLINE v8f q8_0(const uint8_t* b, const float* x, int64_t nblocks) {
    v8f acc = {};
    for (int64_t k = 0; k < nblocks; ++k, b += 34, x += 32) {
        const uint8_t* qs = b + 2;
        v8f p = to_f(load_i8(qs)) * load_x(x);
        p += to_f(load_i8(qs + 8)) * load_x(x + 8);
        p += to_f(load_i8(qs + 16)) * load_x(x + 16);
        p += to_f(load_i8(qs + 24)) * load_x(x + 24);
        acc += blocks::half(b) * p;
    }
    return acc;
}

// Q4_0: d * sum((q - 8) x) per 32; weight j < 16 is the low nibble of byte j, weight j + 16 the high nibble.
STRATA_INLINE v8f q4_0(const uint8_t* b, const float* x, int64_t nblocks) {
    v8f acc = {};
    for (int64_t k = 0; k < nblocks; ++k, b += 18, x += 32) {
        const uint8_t* qs = b + 2;
        const v8i a = load_u8(qs), c = load_u8(qs + 8);
        v8f p = to_f((a & 15) - 8) * load_x(x);
        p += to_f((c & 15) - 8) * load_x(x + 8);
        p += to_f((a >> 4) - 8) * load_x(x + 16);
        p += to_f((c >> 4) - 8) * load_x(x + 24);
        acc += blocks::half(b) * p;
    }
    return acc;
}

// Q4_K / Q5_K: per 64-weight chunk c, two sub-blocks (low and high nibbles of qs[32c..32c+32)); Q5_K adds bit
// 2c / 2c+1 of qh[l] as the fifth bit.
template <bool kFive>
STRATA_INLINE v8f qk_affine(const uint8_t* b, const float* x, int64_t nblocks) {
    constexpr int64_t kBytes = kFive ? 176 : 144;
    v8f acc = {};
    for (int64_t k = 0; k < nblocks; ++k, b += kBytes, x += 256) {
        const float d = blocks::half(b), dmin = blocks::half(b + 2);
        const uint8_t* scales = b + 4;
        const uint8_t* qh = b + 16;
        const uint8_t* qs = b + (kFive ? 48 : 16);
        for (int c = 0; c < 4; ++c) {
            int sc0, m0, sc1, m1;
            blocks::scale_min(scales, 2 * c, sc0, m0);
            blocks::scale_min(scales, 2 * c + 1, sc1, m1);
            const float* x0 = x + 64 * c;
            const float* x1 = x0 + 32;
            v8f p0 = {}, p1 = {}, s0 = {}, s1 = {};
            for (int l = 0; l < 32; l += 8) {
                const v8i q = load_u8(qs + 32 * c + l);
                v8i lo = q & 15, hi = q >> 4;
                if constexpr (kFive) {
                    const v8i h = load_u8(qh + l);
                    lo |= ((h >> (2 * c)) & 1) << 4;
                    hi |= ((h >> (2 * c + 1)) & 1) << 4;
                }
                const v8f xa = load_x(x0 + l), xb = load_x(x1 + l);
                p0 += to_f(lo) * xa;
                p1 += to_f(hi) * xb;
                s0 += xa;
                s1 += xb;
            }
            acc += (d * static_cast<float>(sc0)) * p0 - (dmin * static_cast<float>(m0)) * s0;
            acc += (d * static_cast<float>(sc1)) * p1 - (dmin * static_cast<float>(m1)) * s1;
        }
    }
    return acc;
}

// Q6_K: per 128-weight half, four runs of 32 (low/high nibbles of ql[0..32) and ql[32..64), two bits each of
// qh[0..32)); level q - 32; int8 scale per 16 weights.
STRATA_INLINE v8f q6_k(const uint8_t* b, const float* x, int64_t nblocks) {
    v8f acc = {};
    for (int64_t k = 0; k < nblocks; ++k, b += 210, x += 256) {
        const float d = blocks::half(b + 208);
        const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
        for (int h = 0; h < 2; ++h) {
            const uint8_t* ql = b + 64 * h;
            const uint8_t* qh = b + 128 + 32 * h;
            const float* xh = x + 128 * h;
            for (int is = 0; is < 2; ++is) {  // the two 8-lane runs of one 16-weight scale share a multiply
                v8f p1 = {}, p2 = {}, p3 = {}, p4 = {};
                for (int l = 16 * is; l < 16 * is + 16; l += 8) {
                    const v8i a = load_u8(ql + l), c = load_u8(ql + l + 32), hb = load_u8(qh + l);
                    p1 += to_f(((a & 15) | ((hb & 3) << 4)) - 32) * load_x(xh + l);
                    p2 += to_f(((c & 15) | ((hb << 2) & 48)) - 32) * load_x(xh + l + 32);
                    p3 += to_f(((a >> 4) | (hb & 48)) - 32) * load_x(xh + l + 64);
                    p4 += to_f(((c >> 4) | ((hb >> 2) & 48)) - 32) * load_x(xh + l + 96);
                }
                const int j = 8 * h + is;
                acc += (d * static_cast<float>(sc[j])) * p1 + (d * static_cast<float>(sc[j + 2])) * p2;
                acc += (d * static_cast<float>(sc[j + 4])) * p3 + (d * static_cast<float>(sc[j + 6])) * p4;
            }
        }
    }
    return acc;
}

}  // namespace

STRATA_SIMD_CLONES float dot_blocks(DType t, const uint8_t* row, const float* x, int64_t n) {
    v8f acc = {};
    switch (t) {
        case DType::Q8_0: acc = q8_0(row, x, n / 32); break;
        case DType::Q4_0: acc = q4_0(row, x, n / 32); break;
        case DType::Q4_K: acc = qk_affine<false>(row, x, n / 256); break;
        case DType::Q5_K: acc = qk_affine<true>(row, x, n / 256); break;
        case DType::Q6_K: acc = q6_k(row, x, n / 256); break;
        default: break;
    }
    return hsum(acc);
}

}  // namespace strata::quant::detail
