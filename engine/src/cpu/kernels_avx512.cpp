// The prefill's register tile for CPUs with AVX-512: 16-wide float vectors and 32 registers allow a 4-row x 6-token
// tile (24 accumulators; 10 loads per 24 FMAs, against 6 per 8 for the generic 2 x 4 tile), and masked loads take
// the last columns. Compiled for AVX-512 in a `#pragma GCC target` region below the includes and called only when
// the CPU has it (CpuIsa::Avx512Vnni). Also the F16 and BF16 decode kernels, and attention's two products.
#include "cpu/kernels.hpp"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx2,fma,f16c")
// GCC 12's 512-bit extract / reduce intrinsics pass an undefined vector as their merge source and warn that it
// "may be" or "is" used uninitialized wherever they are inlined (GCC bug 105593, fixed in 13; as quant/dot_q8.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace strata::cpu::avx512 {

namespace {

// Columns of one pass: the tile's 4 weight rows and 6 token rows of one pass (10 x 2 KiB) stay in L1 while the
// passes over the whole prompt read them, instead of streaming whole rows from L2.
constexpr int64_t kColBlock = 512;

// out[q * out_stride + r] (+)= w[r, 0..n) . x[q, 0..n) for R rows of w and Q rows of x, rows `stride` apart; the
// first pass over a row's columns stores, the later ones add.
template <int R, int Q>
inline __attribute__((always_inline)) void tile(const float* w, const float* x, int64_t stride, int64_t n, bool first,
                                                float* out, int64_t out_stride) {
    // The loop is written out twice (full vectors, then the masked last one) rather than as a lambda over acc:
    // GCC 12 kept the lambda's captured accumulators in registers but stored all 24 back to the stack after
    // every step (one store per FMA), which held the tile at ~65 GFLOP/s per core on a Zen 5.
    __m512 acc[Q][R];
    for (int q = 0; q < Q; ++q)
        for (int r = 0; r < R; ++r) acc[q][r] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 wv[R];
        for (int r = 0; r < R; ++r) wv[r] = _mm512_loadu_ps(w + r * stride + i);
        for (int q = 0; q < Q; ++q) {
            const __m512 y = _mm512_loadu_ps(x + q * stride + i);
            for (int r = 0; r < R; ++r) acc[q][r] = _mm512_fmadd_ps(wv[r], y, acc[q][r]);
        }
    }
    if (i < n) {
        const auto m = static_cast<__mmask16>((1u << (n - i)) - 1);
        __m512 wv[R];
        for (int r = 0; r < R; ++r) wv[r] = _mm512_maskz_loadu_ps(m, w + r * stride + i);
        for (int q = 0; q < Q; ++q) {
            const __m512 y = _mm512_maskz_loadu_ps(m, x + q * stride + i);
            for (int r = 0; r < R; ++r) acc[q][r] = _mm512_fmadd_ps(wv[r], y, acc[q][r]);
        }
    }
    for (int q = 0; q < Q; ++q)
        for (int r = 0; r < R; ++r) {
            float& o = out[q * out_stride + r];
            o = first ? _mm512_reduce_add_ps(acc[q][r]) : o + _mm512_reduce_add_ps(acc[q][r]);
        }
}

}  // namespace

void tiles(const float* wblock, int64_t nrows, const float* x, int64_t T, int64_t n, float* out, int64_t out_stride,
           int64_t r_base) {
    // wblock: [nrows, n] widened rows r_base..; x: [T, n]; out: [T, out_stride]
    for (int64_t c0 = 0; c0 < n; c0 += kColBlock) {
        const int64_t len = std::min(kColBlock, n - c0);
        const bool first = c0 == 0;
        for (int64_t j = 0; j < nrows;) {
            const float* w = wblock + j * n + c0;
            const float* xs = x + c0;
            float* o = out + r_base + j;
            if (j + 4 <= nrows) {
                int64_t t = 0;
                for (; t + 6 <= T; t += 6) tile<4, 6>(w, xs + t * n, n, len, first, o + t * out_stride, out_stride);
                for (; t < T; ++t) tile<4, 1>(w, xs + t * n, n, len, first, o + t * out_stride, out_stride);
                j += 4;
            } else {
                int64_t t = 0;
                for (; t + 6 <= T; t += 6) tile<1, 6>(w, xs + t * n, n, len, first, o + t * out_stride, out_stride);
                for (; t < T; ++t) tile<1, 1>(w, xs + t * n, n, len, first, o + t * out_stride, out_stride);
                j += 1;
            }
        }
    }
}

namespace {
inline __attribute__((always_inline)) __m512 load16(const std::byte* p, int64_t i) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2 * i)));
}
inline __attribute__((always_inline)) float load1(const std::byte* p, int64_t i) {
    uint16_t h;
    __builtin_memcpy(&h, p + 2 * i, 2);
    return _cvtsh_ss(h);
}
// Sixteen stored weights as floats: binary16 by vcvtph2ps, bfloat16 by moving its bits into the high half.
struct LoadF16 {
    static __m512 load16(const std::byte* p, int64_t i) { return avx512::load16(p, i); }
    static float load1(const std::byte* p, int64_t i) { return avx512::load1(p, i); }
};
struct LoadBF16 {
    static __m512 load16(const std::byte* p, int64_t i) {
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2 * i));
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    static float load1(const std::byte* p, int64_t i) {
        uint16_t h;
        __builtin_memcpy(&h, p + 2 * i, 2);
        return bf16_to_f32(h);
    }
};

// One row at a time, four partial sums: consecutive rows are consecutive bytes, so a thread's range of rows is
// one sequential stream, which the hardware prefetcher follows across pages (x stays in L1/L2); `ahead` > 0 also
// prefetches that many bytes ahead of the weights read.
template <class L>
inline __attribute__((always_inline)) void matvec_rows(const TensorView& w, const float* x, float* out, int64_t r0,
                                                       int64_t r1, int ahead) {
    const int64_t n = w.cols();
    for (int64_t r = r0; r < r1; ++r) {
        const std::byte* p = w.row_ptr(r);
        __m512 a[4];
        for (int k = 0; k < 4; ++k) a[k] = _mm512_setzero_ps();
        int64_t i = 0;
        for (; i + 64 <= n; i += 64) {
            if (ahead) {
                __builtin_prefetch(p + 2 * i + ahead);
                __builtin_prefetch(p + 2 * i + ahead + 64);
            }
            for (int k = 0; k < 4; ++k)
                a[k] = _mm512_fmadd_ps(L::load16(p, i + 16 * k), _mm512_loadu_ps(x + i + 16 * k), a[k]);
        }
        for (; i + 16 <= n; i += 16) a[0] = _mm512_fmadd_ps(L::load16(p, i), _mm512_loadu_ps(x + i), a[0]);
        float s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3])));
        for (; i < n; ++i) s += L::load1(p, i) * x[i];
        out[r] = s;
    }
}
}  // namespace

void matvec_f16(const TensorView& w, const float* x, float* out, int64_t r0, int64_t r1) {
    matvec_rows<LoadF16>(w, x, out, r0, r1, 0);
}

void matvec_bf16(const TensorView& w, const float* x, float* out, int64_t r0, int64_t r1, int ahead) {
    matvec_rows<LoadBF16>(w, x, out, r0, r1, ahead);
}

float to_f16(const float* x, uint16_t* h, int64_t n) {
    const __m512 inf = _mm512_set1_ps(std::numeric_limits<float>::infinity());
    __m512 m = _mm512_setzero_ps();
    __mmask16 bad = 0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 a = _mm512_abs_ps(_mm512_loadu_ps(x + i));
        bad |= _mm512_cmp_ps_mask(a, inf, _CMP_NLT_UQ);  // infinite or NaN
        m = _mm512_max_ps(m, a);
    }
    float amax = _mm512_reduce_max_ps(m);
    for (; i < n; ++i) {
        bad |= !std::isfinite(x[i]);
        amax = std::max(amax, std::fabs(x[i]));
    }
    if (bad) return 0;
    const float s = half_scale(amax);
    const __m512 sv = _mm512_set1_ps(s);
    for (i = 0; i + 16 <= n; i += 16)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(h + i),
                            _mm512_cvtps_ph(_mm512_mul_ps(_mm512_loadu_ps(x + i), sv), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; ++i) h[i] = _cvtss_sh(x[i] * s, _MM_FROUND_TO_NEAREST_INT);
    return s;
}

void matvec_f16_h(const TensorView& w, const uint16_t* xh, float unscale, float* out, int64_t r0, int64_t r1,
                  int ahead) {
    // As matvec_f16, with x in binary16 too: half the bytes of x pass through L1 per weight.
    const int64_t n = w.cols();
    const std::byte* xb = reinterpret_cast<const std::byte*>(xh);
    for (int64_t r = r0; r < r1; ++r) {
        const std::byte* p = w.row_ptr(r);
        __m512 a[4];
        for (int k = 0; k < 4; ++k) a[k] = _mm512_setzero_ps();
        int64_t i = 0;
        for (; i + 64 <= n; i += 64) {
            if (ahead) {
                __builtin_prefetch(p + 2 * i + ahead);
                __builtin_prefetch(p + 2 * i + ahead + 64);
            }
            for (int k = 0; k < 4; ++k) a[k] = _mm512_fmadd_ps(load16(p, i + 16 * k), load16(xb, i + 16 * k), a[k]);
        }
        for (; i + 16 <= n; i += 16) a[0] = _mm512_fmadd_ps(load16(p, i), load16(xb, i), a[0]);
        float s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3])));
        for (; i < n; ++i) s += load1(p, i) * load1(xb, i);
        out[r] = s * unscale;
    }
}

namespace {
// The sum of each half's lanes 0, 2 beside b's, then lanes 4, 6 beside b's, plus the same of lanes 1, 3, 5, 7: in
// each half of 8 lanes what attention's 8-lane pairwise step gives (kernels.cpp, scores_tile).
inline __attribute__((always_inline)) __m512 pairs(__m512 a, __m512 b) {
    const __m512i even = _mm512_set_epi32(30, 28, 14, 12, 26, 24, 10, 8, 22, 20, 6, 4, 18, 16, 2, 0);
    const __m512i odd = _mm512_set_epi32(31, 29, 15, 13, 27, 25, 11, 9, 23, 21, 7, 5, 19, 17, 3, 1);
    return _mm512_add_ps(_mm512_permutex2var_ps(a, even, b), _mm512_permutex2var_ps(a, odd, b));
}
inline __attribute__((always_inline)) float tree8(const float* a) {
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}
// Eight floats in both halves.
inline __attribute__((always_inline)) __m512 both_halves(const float* p) {
    return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_loadu_pd(reinterpret_cast<const double*>(p))));
}

// Scores of P packed query pairs (qp: per pair D / 8 steps of 16 floats, the pair's 8 columns side by side)
// against K (8 or 1) key rows: each lane of an accumulator is one query's 8-lane partial sum for one key.
template <int P, int K>
inline __attribute__((always_inline)) void pair_scores(const float* qp, int64_t pair_stride, const float* rows,
                                                       int64_t rs, int64_t D, float scale, float* const* s,
                                                       int64_t jj) {
    __m512 acc[P][K];
    for (int p = 0; p < P; ++p)
        for (int k = 0; k < K; ++k) acc[p][k] = _mm512_setzero_ps();
    for (int64_t c = 0; c < D; c += 8) {
        __m512 x[P];
        for (int p = 0; p < P; ++p) x[p] = _mm512_loadu_ps(qp + p * pair_stride + 2 * c);
        for (int k = 0; k < K; ++k) {
            const __m512 r = both_halves(rows + k * rs + c);
            for (int p = 0; p < P; ++p) acc[p][k] = _mm512_fmadd_ps(x[p], r, acc[p][k]);
        }
    }
    const __m512 sc = _mm512_set1_ps(scale);
    for (int p = 0; p < P; ++p) {
        if constexpr (K == 8) {
            const __m512 u0 = pairs(pairs(acc[p][0], acc[p][1]), pairs(acc[p][2], acc[p][3]));
            const __m512 u1 = pairs(pairs(acc[p][4], acc[p][5]), pairs(acc[p][6], acc[p][7]));
            // Per half: lanes 0-3 of u0 and of u1, plus their lanes 4-7: the eight keys' sums in order.
            const __m512i lo = _mm512_set_epi32(27, 26, 25, 24, 11, 10, 9, 8, 19, 18, 17, 16, 3, 2, 1, 0);
            const __m512i hi = _mm512_set_epi32(31, 30, 29, 28, 15, 14, 13, 12, 23, 22, 21, 20, 7, 6, 5, 4);
            const __m512 v = _mm512_mul_ps(
                _mm512_add_ps(_mm512_permutex2var_ps(u0, lo, u1), _mm512_permutex2var_ps(u0, hi, u1)), sc);
            _mm256_storeu_ps(s[2 * p] + jj, _mm512_castps512_ps256(v));
            _mm256_storeu_ps(s[2 * p + 1] + jj, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
        } else {
            alignas(64) float a[16];
            _mm512_store_ps(a, acc[p][0]);
            s[2 * p][jj] = tree8(a) * scale;
            s[2 * p + 1][jj] = tree8(a + 8) * scale;
        }
    }
}

// out_q[c] += sum_jj p_q[jj] rows[jj][c] for Q queries, c in [c0, c0 + 16 U).
template <int Q, int U>
inline __attribute__((always_inline)) void values_tile(float* const* out, const float* const* p, const float* rows,
                                                       int64_t rs, int64_t nb, int64_t c0) {
    __m512 acc[Q][U];
    for (int q = 0; q < Q; ++q)
        for (int u = 0; u < U; ++u) acc[q][u] = _mm512_loadu_ps(out[q] + c0 + 16 * u);
    for (int64_t jj = 0; jj < nb; ++jj) {
        __m512 r[U];
        for (int u = 0; u < U; ++u) r[u] = _mm512_loadu_ps(rows + jj * rs + c0 + 16 * u);
        for (int q = 0; q < Q; ++q) {
            const __m512 pj = _mm512_set1_ps(p[q][jj]);
            for (int u = 0; u < U; ++u) acc[q][u] = _mm512_fmadd_ps(pj, r[u], acc[q][u]);
        }
    }
    for (int q = 0; q < Q; ++q)
        for (int u = 0; u < U; ++u) _mm512_storeu_ps(out[q] + c0 + 16 * u, acc[q][u]);
}
template <int Q>
inline __attribute__((always_inline)) void values_rows(float* const* out, const float* const* p, const float* rows,
                                                       int64_t rs, int64_t nb, int64_t D) {
    int64_t c = 0;
    for (; c + 64 <= D; c += 64) values_tile<Q, 4>(out, p, rows, rs, nb, c);
    for (; c < D; c += 16) values_tile<Q, 1>(out, p, rows, rs, nb, c);
}
}  // namespace

void attention_scores(const float* const* q, int64_t M, const float* rows, int64_t rs, int64_t nb, int64_t D,
                      float scale, float* const* s) {
    thread_local std::vector<float> qp;  // the queries in pairs; an odd last query is paired with itself
    const int64_t pairs_n = (M + 1) / 2, pair_stride = 2 * D;
    qp.resize(static_cast<size_t>(pairs_n * pair_stride));
    for (int64_t pr = 0; pr < pairs_n; ++pr) {
        const float* a = q[2 * pr];
        const float* b = q[std::min(2 * pr + 1, M - 1)];
        for (int64_t c = 0; c < D; c += 8) {
            std::copy(a + c, a + c + 8, qp.data() + pr * pair_stride + 2 * c);
            std::copy(b + c, b + c + 8, qp.data() + pr * pair_stride + 2 * c + 8);
        }
    }
    thread_local std::vector<float> twin;  // where an odd last query's twin goes
    twin.resize(static_cast<size_t>(nb));
    for (int64_t pr = 0; pr < pairs_n; pr += 2) {
        const int P = pr + 2 <= pairs_n ? 2 : 1;
        float* sp[4];
        for (int i = 0; i < 2 * P; ++i) sp[i] = 2 * pr + i < M ? s[2 * pr + i] : twin.data();
        const float* qpp = qp.data() + pr * pair_stride;
        int64_t jj = 0;
        if (P == 2) {
            for (; jj + 8 <= nb; jj += 8) pair_scores<2, 8>(qpp, pair_stride, rows + jj * rs, rs, D, scale, sp, jj);
            for (; jj < nb; ++jj) pair_scores<2, 1>(qpp, pair_stride, rows + jj * rs, rs, D, scale, sp, jj);
        } else {
            for (; jj + 8 <= nb; jj += 8) pair_scores<1, 8>(qpp, pair_stride, rows + jj * rs, rs, D, scale, sp, jj);
            for (; jj < nb; ++jj) pair_scores<1, 1>(qpp, pair_stride, rows + jj * rs, rs, D, scale, sp, jj);
        }
    }
}

void attention_values(float* const* out, const float* const* p, const int64_t* nk, int64_t M, const float* rows,
                      int64_t rs, int64_t D) {
    int64_t m = 0;
    for (; m + 4 <= M; m += 4) {
        const int64_t common = std::min({nk[m], nk[m + 1], nk[m + 2], nk[m + 3]});
        values_rows<4>(out + m, p + m, rows, rs, common, D);
        for (int64_t i = m; i < m + 4; ++i) {
            const float* rest = p[i] + common;
            values_rows<1>(out + i, &rest, rows + common * rs, rs, nk[i] - common, D);
        }
    }
    for (; m < M; ++m) values_rows<1>(out + m, p + m, rows, rs, nk[m], D);
}

}  // namespace strata::cpu::avx512

#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
