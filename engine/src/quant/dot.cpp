// sum_i w[i] * x[i] straight from the blocks, x in float32 (activations are never quantized). Each sub-block
// contributes scale * sum(q * x) - min * sum(x): the integer levels q are widened to float and multiplied with x,
// and the sub-block's scale and min are applied once per sub-block instead of once per weight. Written with GCC
// vector extensions (8 floats, dot_exact.inc) and compiled twice: for any CPU, and for AVX2 + FMA, where the
// bytes are widened by vpmovzxbd / vpmovsxbd (GCC lowers a byte-vector conversion of the generic code to scalar
// inserts, so that version widens by shifts); the result equals the dot of the dequantized weights up to
// float32 rounding (tested).
#include <cstring>

#include "quant/blocks.hpp"
#include "quant/dot.hpp"

#pragma GCC diagnostic ignored "-Wpsabi"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define STRATA_DOT_AVX2 1
#include <immintrin.h>
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
namespace generic {
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

#include "quant/dot_exact.inc"
float dot_kernel(DType t, const uint8_t* row, const float* x, int64_t n) { return dot_vector(t, row, x, n); }
}  // namespace generic

#ifdef STRATA_DOT_AVX2
#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace avx2 {
STRATA_INLINE v8i load_u8(const uint8_t* p) {
    return (v8i)_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
STRATA_INLINE v8i load_i8(const uint8_t* p) {
    return (v8i)_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
STRATA_INLINE v8f to_f(v8i v) { return __builtin_convertvector(v, v8f); }
STRATA_INLINE float hsum(v8f v) {
    return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

#include "quant/dot_exact.inc"

// The eight 6-bit scales and mins of a Q4_K / Q5_K super-block (blocks::scale_min's packing) times d and dmin,
// in sc[8] and mn[8]: unpacked a word at a time and converted eight lanes at once, not one sub-block at a time.
STRATA_INLINE void k_scales(const uint8_t* b, float* sc, float* mn) {
    uint32_t w[3];
    std::memcpy(w, b + 4, 12);
    const uint32_t sc_hi = (w[2] & 0x0f0f0f0fu) | (((w[0] >> 6) & 0x03030303u) << 4);
    const uint32_t mn_hi = ((w[2] >> 4) & 0x0f0f0f0fu) | (((w[1] >> 6) & 0x03030303u) << 4);
    const uint64_t s = (w[0] & 0x3f3f3f3fu) | (uint64_t(sc_hi) << 32);
    const uint64_t m = (w[1] & 0x3f3f3f3fu) | (uint64_t(mn_hi) << 32);
    auto widen = [](uint64_t v) {
        return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(v))));
    };
    _mm256_storeu_ps(sc, _mm256_mul_ps(widen(s), _mm256_set1_ps(blocks::half(b))));
    _mm256_storeu_ps(mn, _mm256_mul_ps(widen(m), _mm256_set1_ps(blocks::half(b + 2))));
}

STRATA_INLINE __m256 x8(const float* x) { return _mm256_loadu_ps(x); }
STRATA_INLINE __m256i u8x8(const uint8_t* p) { return (__m256i)load_u8(p); }
STRATA_INLINE float hsum8(__m256 v) { return hsum((v8f)v); }

// Q4_K as dot_vector's, with a super-block's scales and mins converted eight at once (k_scales) instead of one
// sub-block at a time in scalar code, and four chains of additions.
STRATA_INLINE float q4_k_scaled(const uint8_t* b, const float* x, int64_t nblocks) {
    const __m256i m15 = _mm256_set1_epi32(15);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps(), min0 = _mm256_setzero_ps(),
           min1 = _mm256_setzero_ps();
    alignas(32) float sc[8], mn[8];
    for (int64_t k = 0; k < nblocks; ++k, b += 144, x += 256) {
        k_scales(b, sc, mn);
        const uint8_t* qs = b + 16;
        for (int c = 0; c < 4; ++c) {
            const float* x0 = x + 64 * c;
            const float* x1 = x0 + 32;
            __m256 p0 = _mm256_setzero_ps(), p1 = _mm256_setzero_ps(), s0 = _mm256_setzero_ps(),
                   s1 = _mm256_setzero_ps();
            for (int l = 0; l < 32; l += 8) {
                const __m256i q = u8x8(qs + 32 * c + l);
                const __m256 xa = x8(x0 + l), xb = x8(x1 + l);
                p0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(q, m15)), xa, p0);
                p1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(q, 4)), xb, p1);
                s0 = _mm256_add_ps(s0, xa);
                s1 = _mm256_add_ps(s1, xb);
            }
            acc0 = _mm256_fmadd_ps(_mm256_set1_ps(sc[2 * c]), p0, acc0);
            min0 = _mm256_fmadd_ps(_mm256_set1_ps(mn[2 * c]), s0, min0);
            acc1 = _mm256_fmadd_ps(_mm256_set1_ps(sc[2 * c + 1]), p1, acc1);
            min1 = _mm256_fmadd_ps(_mm256_set1_ps(mn[2 * c + 1]), s1, min1);
        }
    }
    return hsum8(_mm256_sub_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(min0, min1)));
}

// Q6_K as dot_vector's, with the sixteen scales times d converted at once per super-block.
STRATA_INLINE float q6_k_scaled(const uint8_t* b, const float* x, int64_t nblocks) {
    const __m256i m15 = _mm256_set1_epi32(15), m48 = _mm256_set1_epi32(48), m3 = _mm256_set1_epi32(3),
                  m32 = _mm256_set1_epi32(32);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    alignas(32) float dsc[16];
    for (int64_t k = 0; k < nblocks; ++k, b += 210, x += 256) {
        const __m256 d = _mm256_set1_ps(blocks::half(b + 208));
        for (int i = 0; i < 2; ++i)
            _mm256_store_ps(dsc + 8 * i, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(
                                                           reinterpret_cast<const __m128i*>(b + 192 + 8 * i)))),
                                                       d));
        for (int h = 0; h < 2; ++h) {
            const uint8_t* ql = b + 64 * h;
            const uint8_t* qh = b + 128 + 32 * h;
            const float* xh = x + 128 * h;
            for (int is = 0; is < 2; ++is) {  // the weights of scales j, j + 2, j + 4, j + 6
                const int j = 8 * h + is;
                __m256 p[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
                for (int l = 16 * is; l < 16 * is + 16; l += 8) {
                    const __m256i a = u8x8(ql + l), c = u8x8(ql + l + 32), hb = u8x8(qh + l);
                    const __m256i q[4] = {
                        _mm256_or_si256(_mm256_and_si256(a, m15), _mm256_slli_epi32(_mm256_and_si256(hb, m3), 4)),
                        _mm256_or_si256(_mm256_and_si256(c, m15), _mm256_and_si256(_mm256_slli_epi32(hb, 2), m48)),
                        _mm256_or_si256(_mm256_srli_epi32(a, 4), _mm256_and_si256(hb, m48)),
                        _mm256_or_si256(_mm256_srli_epi32(c, 4), _mm256_and_si256(_mm256_srli_epi32(hb, 2), m48))};
                    for (int r = 0; r < 4; ++r)
                        p[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(q[r], m32)), x8(xh + l + 32 * r),
                                               p[r]);
                }
                for (int r = 0; r < 4; ++r) acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dsc[j + 2 * r]), p[r], acc[r]);
            }
        }
    }
    return hsum8(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
}

// Q8_0, Q4_0 and Q5_K as dot_vector's (the widening is where the AVX2 form differs).
float dot_kernel(DType t, const uint8_t* row, const float* x, int64_t n) {
    switch (t) {
        case DType::Q4_K: return q4_k_scaled(row, x, n / 256);
        case DType::Q6_K: return q6_k_scaled(row, x, n / 256);
        default: return dot_vector(t, row, x, n);
    }
}
}  // namespace avx2
#pragma GCC pop_options

// 16-wide forms of the same sums for the types of Q8_0 and Q4_K_M files (Q8_0, Q4_K, Q6_K): 16 bytes widened by
// one vpmovzxbd / vpmovsxbd, so a unit of 32 weights is two vectors.
#pragma GCC push_options
#pragma GCC target("avx2,fma,avx512f,avx512bw,avx512vl")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's 512-bit intrinsics (bug 105593, as dot_q8.cpp)
namespace avx512 {
STRATA_INLINE __m512i u8x16(const uint8_t* p) {
    return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
STRATA_INLINE __m512 s8x16(const uint8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
STRATA_INLINE __m512 x16(const float* x) { return _mm512_loadu_ps(x); }
STRATA_INLINE __m512 f(__m512i v) { return _mm512_cvtepi32_ps(v); }

// Q8_0: d * sum(q x) per 32.
STRATA_INLINE float q8_0(const uint8_t* b, const float* x, int64_t nblocks) {
    auto block = [&](const uint8_t* blk, const float* xb, __m512 acc) {
        const __m512 p = _mm512_fmadd_ps(s8x16(blk + 2), x16(xb), _mm512_mul_ps(s8x16(blk + 18), x16(xb + 16)));
        return _mm512_fmadd_ps(_mm512_set1_ps(blocks::half(blk)), p, acc);
    };
    __m512 even = _mm512_setzero_ps(), odd = _mm512_setzero_ps();  // two chains of FMAs
    int64_t k = 0;
    for (; k + 2 <= nblocks; k += 2, b += 68, x += 64) {
        even = block(b, x, even);
        odd = block(b + 34, x + 32, odd);
    }
    if (k < nblocks) even = block(b, x, even);
    return _mm512_reduce_add_ps(_mm512_add_ps(even, odd));
}

// Q4_K: per 64-weight chunk c, sub-block 2c in the low nibbles of qs[32c..32c+32) and 2c + 1 in the high ones;
// scale * sum(q x) - min * sum(x) per sub-block.
STRATA_INLINE float q4_k(const uint8_t* b, const float* x, int64_t nblocks) {
    const __m512i m15 = _mm512_set1_epi32(15);
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    alignas(32) float sc[8], mn[8];
    for (int64_t k = 0; k < nblocks; ++k, b += 144, x += 256) {
        avx2::k_scales(b, sc, mn);
        const uint8_t* qs = b + 16;
        for (int c = 0; c < 4; ++c) {
            const __m512i q0 = u8x16(qs + 32 * c), q1 = u8x16(qs + 32 * c + 16);
            const float* x0 = x + 64 * c;
            const __m512 xa = x16(x0), xb = x16(x0 + 16), xc = x16(x0 + 32), xd = x16(x0 + 48);
            const __m512 p0 = _mm512_fmadd_ps(f(_mm512_and_si512(q0, m15)), xa,
                                              _mm512_mul_ps(f(_mm512_and_si512(q1, m15)), xb));
            const __m512 p1 = _mm512_fmadd_ps(f(_mm512_srli_epi32(q0, 4)), xc,
                                              _mm512_mul_ps(f(_mm512_srli_epi32(q1, 4)), xd));
            acc[0] = _mm512_fmadd_ps(_mm512_set1_ps(sc[2 * c]), p0, acc[0]);
            acc[1] = _mm512_fnmadd_ps(_mm512_set1_ps(mn[2 * c]), _mm512_add_ps(xa, xb), acc[1]);
            acc[2] = _mm512_fmadd_ps(_mm512_set1_ps(sc[2 * c + 1]), p1, acc[2]);
            acc[3] = _mm512_fnmadd_ps(_mm512_set1_ps(mn[2 * c + 1]), _mm512_add_ps(xc, xd), acc[3]);
        }
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
}

// Q6_K: per 128-weight half, four runs of 32 (low / high nibbles of ql[0..32) and ql[32..64), two bits each of
// qh[0..32)), level q - 32, an int8 scale per 16 weights: each 16-lane vector is one scale's weights.
STRATA_INLINE float q6_k(const uint8_t* b, const float* x, int64_t nblocks) {
    const __m512i m15 = _mm512_set1_epi32(15), m48 = _mm512_set1_epi32(48), m3 = _mm512_set1_epi32(3),
                  m32 = _mm512_set1_epi32(32);
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    alignas(64) float dsc[16];
    for (int64_t k = 0; k < nblocks; ++k, b += 210, x += 256) {
        _mm512_store_ps(dsc, _mm512_mul_ps(s8x16(b + 192), _mm512_set1_ps(blocks::half(b + 208))));  // d * scale
        for (int h = 0; h < 2; ++h) {
            const uint8_t* ql = b + 64 * h;
            const uint8_t* qh = b + 128 + 32 * h;
            const float* xh = x + 128 * h;
            for (int is = 0; is < 2; ++is) {
                const int l = 16 * is, j = 8 * h + is;
                const __m512i a = u8x16(ql + l), c = u8x16(ql + l + 32), hb = u8x16(qh + l);
                const __m512i q[4] = {
                    _mm512_or_si512(_mm512_and_si512(a, m15), _mm512_slli_epi32(_mm512_and_si512(hb, m3), 4)),
                    _mm512_or_si512(_mm512_and_si512(c, m15), _mm512_and_si512(_mm512_slli_epi32(hb, 2), m48)),
                    _mm512_or_si512(_mm512_srli_epi32(a, 4), _mm512_and_si512(hb, m48)),
                    _mm512_or_si512(_mm512_srli_epi32(c, 4), _mm512_and_si512(_mm512_srli_epi32(hb, 2), m48))};
                for (int r = 0; r < 4; ++r)  // run r: weights l.. of the 32 at 32 r, scale j + 2 r
                    acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(dsc[j + 2 * r]),
                                             _mm512_mul_ps(f(_mm512_sub_epi32(q[r], m32)), x16(xh + l + 32 * r)),
                                             acc[r]);
            }
        }
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
}

// Q4_0 and Q5_K (not in the files bench compares) take the AVX2 forms.
float dot_kernel(DType t, const uint8_t* row, const float* x, int64_t n) {
    switch (t) {
        case DType::Q8_0: return q8_0(row, x, n / 32);
        case DType::Q4_K: return q4_k(row, x, n / 256);
        case DType::Q6_K: return q6_k(row, x, n / 256);
        default: return avx2::dot_kernel(t, row, x, n);
    }
}
}  // namespace avx512
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

}  // namespace

float dot_blocks(DType t, const uint8_t* row, const float* x, int64_t n, CpuIsa isa) {
#ifdef STRATA_DOT_AVX2
    if (isa == CpuIsa::Avx512Vnni) return avx512::dot_kernel(t, row, x, n);
    if (isa != CpuIsa::Generic) return avx2::dot_kernel(t, row, x, n);
#endif
    (void)isa;
    return generic::dot_kernel(t, row, x, n);
}

}  // namespace strata::quant::detail
