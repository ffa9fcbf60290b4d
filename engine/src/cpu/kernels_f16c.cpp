// F16 weights widened by F16C's vcvtph2ps (8 halves to 8 floats in one instruction, exact like the integer bit
// trick of kernels.cpp, which takes ~10 vector operations per 8 weights). The loops mirror kernels.cpp's
// matvec_impl and widen_impl; they are compiled for AVX2 + FMA + F16C in a `#pragma GCC target` region below the
// includes (so nothing from the headers is compiled for that target) and called only when the CPU has them.
#include "cpu/kernels.hpp"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "strata/dtype.hpp"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace strata::cpu::f16c {

namespace {

inline __attribute__((always_inline)) __m256 load8(const std::byte* p, int64_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i)));
}
inline __attribute__((always_inline)) float load1(const std::byte* p, int64_t i) {
    uint16_t h;
    __builtin_memcpy(&h, p + 2 * i, 2);
    return _cvtsh_ss(h);
}
inline __attribute__((always_inline)) float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

}  // namespace

void widen(const std::byte* p, float* out, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, load8(p, i));
    for (; i < n; ++i) out[i] = load1(p, i);
}

float to_f16(const float* x, uint16_t* h, int64_t n) {
    const __m256 sign = _mm256_set1_ps(-0.0f), inf = _mm256_set1_ps(std::numeric_limits<float>::infinity());
    __m256 m = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i));
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, inf, _CMP_NLT_UQ));  // infinite or NaN
        m = _mm256_max_ps(m, a);
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, m);
    float amax = 0;
    for (float v : lanes) amax = std::max(amax, v);
    bool finite = _mm256_movemask_ps(bad) == 0;
    for (; i < n; ++i) {
        finite = finite && std::isfinite(x[i]);
        amax = std::max(amax, std::fabs(x[i]));
    }
    if (!finite) return 0;
    const float s = half_scale(amax);
    const __m256 sv = _mm256_set1_ps(s);
    for (i = 0; i + 8 <= n; i += 8)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i),
                         _mm256_cvtps_ph(_mm256_mul_ps(_mm256_loadu_ps(x + i), sv), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; ++i) h[i] = _cvtss_sh(x[i] * s, _MM_FROUND_TO_NEAREST_INT);
    return s;
}

namespace {
// Eight weights (or binary16 activations) as floats: binary16 by vcvtph2ps, bfloat16 by moving its bits into the
// high half; and x as float32.
struct LoadF16 {
    static __m256 load8(const void* p, int64_t i) { return f16c::load8(static_cast<const std::byte*>(p), i); }
    static float load1(const void* p, int64_t i) { return f16c::load1(static_cast<const std::byte*>(p), i); }
};
struct LoadBF16 {
    static __m256 load8(const void* p, int64_t i) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(p) + i));
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    static float load1(const void* p, int64_t i) { return bf16_to_f32(static_cast<const uint16_t*>(p)[i]); }
};
struct LoadF32 {
    static __m256 load8(const void* p, int64_t i) { return _mm256_loadu_ps(static_cast<const float*>(p) + i); }
    static float load1(const void* p, int64_t i) { return static_cast<const float*>(p)[i]; }
};

// Four rows of 2-byte weights W at once against one x stored as X, two partial sums per row (as kernels.cpp's
// matvec_impl), each sum times `unscale`: each 16 elements of x are read, and widened where X is binary16, once
// for four rows. PREFETCH asks for the next four rows, ahead of the hardware prefetcher (which stops at every 4 KiB
// page), spread over this block's loop: one line of each next row per line of each row read, so the requests keep
// pace with the reads instead of arriving in one burst (dot_q8_x86.inc prefetches a row ahead in the same way).
template <class W, class X, bool PREFETCH>
inline __attribute__((always_inline)) void four_rows(const TensorView& w, const void* x, float unscale, float* out,
                                                     int64_t r0, int64_t r1) {
    const int64_t n = w.cols();
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) {
        const std::byte* p[4] = {w.row_ptr(r), w.row_ptr(r + 1), w.row_ptr(r + 2), w.row_ptr(r + 3)};
        const bool prefetch = PREFETCH && r + 8 <= r1;
        const std::byte* ahead[4] = {};
        if (prefetch)
            for (int j = 0; j < 4; ++j) ahead[j] = w.row_ptr(r + 4 + j);
        __m256 a[4], b[4];
        for (int j = 0; j < 4; ++j) a[j] = b[j] = _mm256_setzero_ps();
        int64_t i = 0;
        for (; i + 16 <= n; i += 16) {
            if (prefetch && (i & 31) == 0)
                for (int j = 0; j < 4; ++j) __builtin_prefetch(ahead[j] + 2 * i);
            const __m256 xa = X::load8(x, i), xb = X::load8(x, i + 8);
            for (int j = 0; j < 4; ++j) {
                a[j] = _mm256_fmadd_ps(W::load8(p[j], i), xa, a[j]);
                b[j] = _mm256_fmadd_ps(W::load8(p[j], i + 8), xb, b[j]);
            }
        }
        for (int j = 0; j < 4; ++j) {
            float s = hsum(_mm256_add_ps(a[j], b[j]));
            for (int64_t t = i; t < n; ++t) s += W::load1(p[j], t) * X::load1(x, t);
            out[r + j] = s * unscale;
        }
    }
    for (; r < r1; ++r) {
        const std::byte* p = w.row_ptr(r);
        __m256 a = _mm256_setzero_ps(), b = _mm256_setzero_ps();
        int64_t i = 0;
        for (; i + 16 <= n; i += 16) {
            a = _mm256_fmadd_ps(W::load8(p, i), X::load8(x, i), a);
            b = _mm256_fmadd_ps(W::load8(p, i + 8), X::load8(x, i + 8), b);
        }
        float s = hsum(_mm256_add_ps(a, b));
        for (; i < n; ++i) s += W::load1(p, i) * X::load1(x, i);
        out[r] = s * unscale;
    }
}

}  // namespace

void matvec(const TensorView& w, const float* x, float* out, int64_t r0, int64_t r1) {
    four_rows<LoadF16, LoadF32, true>(w, x, 1.0f, out, r0, r1);
}

// x in binary16 as well: four rows at once, so that x is widened once per four rows (one row at a time, x's
// widening matched the weights' and decode fell behind the memory on an AVX2 Zen 3), and no software prefetch
// (slower there, with one row at a time too).
void matvec_h(const TensorView& w, const uint16_t* xh, float unscale, float* out, int64_t r0, int64_t r1) {
    four_rows<LoadF16, LoadF16, false>(w, xh, unscale, out, r0, r1);
}

void widen_bf16(const std::byte* p, float* out, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, LoadBF16::load8(p, i));
    for (; i < n; ++i) out[i] = LoadBF16::load1(p, i);
}

// Four rows at once too, without software prefetch: on the AVX2 Zen 3 an 8B BF16 decode step took 532 ms so
// against 678 one row at a time with the 4 KiB prefetch (2026-12-07, later).
void matvec_bf16(const TensorView& w, const float* x, float* out, int64_t r0, int64_t r1) {
    four_rows<LoadBF16, LoadF32, false>(w, x, 1.0f, out, r0, r1);
}

}  // namespace strata::cpu::f16c

#pragma GCC pop_options
#endif
