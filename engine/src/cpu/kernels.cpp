#include "cpu/kernels.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "strata/error.hpp"
#include "strata/quant.hpp"

// 32-byte vectors are passed only between always-inlined helpers, so the ABI note does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define STRATA_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define STRATA_SIMD_CLONES
#endif
#define STRATA_INLINE static inline __attribute__((always_inline))
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define STRATA_HAVE_F16C 1  // kernels_f16c.cpp and kernels_avx512.cpp are compiled
#endif

namespace strata::cpu {

namespace {

typedef float v8f __attribute__((vector_size(32)));
typedef uint32_t v8u __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef uint16_t v8h __attribute__((vector_size(16)));
typedef double v4d __attribute__((vector_size(32)));

STRATA_INLINE v8f as_f(v8u u) {
    v8f f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}
STRATA_INLINE v8f as_f(v8i i) {
    v8f f;
    std::memcpy(&f, &i, sizeof f);
    return f;
}
STRATA_INLINE v8i as_i(v8f f) {
    v8i i;
    std::memcpy(&i, &f, sizeof i);
    return i;
}
STRATA_INLINE v8u as_u(v8f f) {
    v8u u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}
STRATA_INLINE v8f load8f(const float* p) {
    v8f v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
STRATA_INLINE void store8f(float* p, v8f v) { std::memcpy(p, &v, sizeof v); }
STRATA_INLINE float hsum(v8f v) {
    return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

// Eight stored weights starting at element i, widened to float32. One loader per storage type; F16 uses an
// integer bit trick (shift the exponent+mantissa into place, rescale by 2^112) so that it vectorises on any
// target and is exact for normals, subnormals, infinities and NaNs.
struct LoadF32 {
    STRATA_INLINE v8f load8(const std::byte* p, int64_t i) {
        v8f f;
        std::memcpy(&f, p + 4 * i, sizeof f);
        return f;
    }
    STRATA_INLINE float load1(const std::byte* p, int64_t i) {
        float f;
        std::memcpy(&f, p + 4 * i, 4);
        return f;
    }
};
struct LoadBF16 {
    STRATA_INLINE v8f load8(const std::byte* p, int64_t i) {
        v8h h;
        std::memcpy(&h, p + 2 * i, sizeof h);
        return as_f(__builtin_convertvector(h, v8u) << 16);
    }
    STRATA_INLINE float load1(const std::byte* p, int64_t i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        uint32_t u = uint32_t(h) << 16;
        float f;
        std::memcpy(&f, &u, 4);
        return f;
    }
};
struct LoadF16 {
    STRATA_INLINE v8f load8(const std::byte* p, int64_t i) {
        v8h h;
        std::memcpy(&h, p + 2 * i, sizeof h);
        const v8u u = __builtin_convertvector(h, v8u);
        const v8u sign = (u & 0x8000u) << 16;
        const v8u em = u & 0x7fffu;
        const v8u scaled = as_u(as_f(em << 13) * 0x1p112f);          // normals and subnormals
        const v8u special = (v8u)(em >= 0x7c00u);                      // inf / nan: all-ones exponent
        const v8u infnan = (em << 13) | 0x7f800000u;
        return as_f(((special & infnan) | (~special & scaled)) | sign);
    }
    STRATA_INLINE float load1(const std::byte* p, int64_t i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        return f16_to_f32(h);
    }
};

template <class L>
STRATA_INLINE void widen_impl(const std::byte* p, float* out, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const v8f f = L::load8(p, i);
        std::memcpy(out + i, &f, sizeof f);
    }
    for (; i < n; ++i) out[i] = L::load1(p, i);
}

// Four rows at once against one x: x is loaded once per four weight rows, and two partial sums per row keep
// the floating-point units busy while the weights stream in from memory.
template <class L>
STRATA_INLINE void matvec_impl(const TensorView& w, const float* x, float* out, int64_t r0, int64_t r1) {
    const int64_t n = w.cols();
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) {
        const std::byte* p0 = w.row_ptr(r);
        const std::byte* p1 = w.row_ptr(r + 1);
        const std::byte* p2 = w.row_ptr(r + 2);
        const std::byte* p3 = w.row_ptr(r + 3);
        v8f a0 = {}, a1 = {}, a2 = {}, a3 = {}, b0 = {}, b1 = {}, b2 = {}, b3 = {};
        int64_t i = 0;
        for (; i + 16 <= n; i += 16) {
            v8f xa, xb;
            std::memcpy(&xa, x + i, sizeof xa);
            std::memcpy(&xb, x + i + 8, sizeof xb);
            a0 += L::load8(p0, i) * xa;
            a1 += L::load8(p1, i) * xa;
            a2 += L::load8(p2, i) * xa;
            a3 += L::load8(p3, i) * xa;
            b0 += L::load8(p0, i + 8) * xb;
            b1 += L::load8(p1, i + 8) * xb;
            b2 += L::load8(p2, i + 8) * xb;
            b3 += L::load8(p3, i + 8) * xb;
        }
        float s0 = hsum(a0 + b0), s1 = hsum(a1 + b1), s2 = hsum(a2 + b2), s3 = hsum(a3 + b3);
        for (; i < n; ++i) {
            s0 += L::load1(p0, i) * x[i];
            s1 += L::load1(p1, i) * x[i];
            s2 += L::load1(p2, i) * x[i];
            s3 += L::load1(p3, i) * x[i];
        }
        out[r] = s0;
        out[r + 1] = s1;
        out[r + 2] = s2;
        out[r + 3] = s3;
    }
    for (; r < r1; ++r) {
        const std::byte* p = w.row_ptr(r);
        v8f a = {}, b = {};
        int64_t i = 0;
        for (; i + 16 <= n; i += 16) {
            v8f xa, xb;
            std::memcpy(&xa, x + i, sizeof xa);
            std::memcpy(&xb, x + i + 8, sizeof xb);
            a += L::load8(p, i) * xa;
            b += L::load8(p, i + 8) * xb;
        }
        float s = hsum(a + b);
        for (; i < n; ++i) s += L::load1(p, i) * x[i];
        out[r] = s;
    }
}

STRATA_INLINE float dot_impl(const float* a, const float* b, int64_t n) {
    v8f s0 = {}, s1 = {};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        v8f a0, a1, b0, b1;
        std::memcpy(&a0, a + i, sizeof a0);
        std::memcpy(&a1, a + i + 8, sizeof a1);
        std::memcpy(&b0, b + i, sizeof b0);
        std::memcpy(&b1, b + i + 8, sizeof b1);
        s0 += a0 * b0;
        s1 += a1 * b1;
    }
    float s = hsum(s0 + s1);
    for (; i < n; ++i) s += a[i] * b[i];
    return s;
}

// Attention reads keys and values in blocks of this many floats (16 KB), so that a block stays in L1 while the
// query heads of its kv head use it.
constexpr int64_t kKvBlockFloats = 4096;

// Rows [j0, j0 + nb) of one kv head's keys or values as float32 rows *rs floats apart: a float32 cache's own rows,
// or (where `copy` asks for it) those rows copied into wide ([nb, D]); binary16 rows are always widened exactly into
// wide. A head's part of a cache row is a few lines a whole cache row apart, so a block read in place falls on a
// few of L1's sets and is evicted while a prompt's queries use it (the 1B shape: a row every 2 KB). A binary16 row
// of a head is also too short a stream for the hardware prefetchers, so each widening asks for the row kKvAhead
// rows on (decode after 2048 tokens 10-12% faster; a float32 row, twice as long, gained nothing from it).
constexpr int64_t kKvAhead = 16;
STRATA_INLINE const float* kv_rows(const KvHead& kv, int64_t j0, int64_t nb, int64_t D, bool copy, float* wide,
                                   int64_t* rs, CpuIsa isa) {
    *rs = kv.f32 && !copy ? kv.stride : D;
    if (kv.f32 && (!copy || kv.stride == D)) return kv.f32 + j0 * *rs;
    for (int64_t jj = j0; jj < j0 + nb; ++jj) {
        float* to = wide + (jj - j0) * D;
        if (kv.f32) {  // vectors here: a call to memcpy per row of 64 floats took a sixth of attention's time
            const float* from = kv.f32 + jj * kv.stride;
            int64_t c = 0;
            for (; c + 8 <= D; c += 8) store8f(to + c, load8f(from + c));
            for (; c < D; ++c) to[c] = from[c];
            continue;
        }
        for (int64_t l = 0; l < D; l += 32) __builtin_prefetch(kv.f16 + (jj + kKvAhead) * kv.stride + l);
        widen_f16(kv.f16 + jj * kv.stride, to, D, isa);
    }
    return wide;
}

// Attention's arithmetic, the same for every tile of queries, so that a token's result does not depend on the
// tokens beside it: a score q . k is eight lane sums over the columns in steps of 8 (an FMA each), added as
// ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)), then the last D % 8 columns one by one, then times the scale;
// each output column is a chain of FMAs over the keys in their order.
STRATA_INLINE float tree8(v8f a) { return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7])); }
STRATA_INLINE float score_tail(float h, const float* q, const float* row, int64_t c, int64_t D) {
    for (; c < D; ++c) h += row[c] * q[c];
    return h;
}

// Scores of one query against NK (8 or 1) key rows at rows + kk * rs: s[kk] for kk < NK, each key's eight lane sums
// added as tree8 (for eight keys at once: pairwise sums of neighbours, as avx512::attention_scores does).
template <int NK>
STRATA_INLINE void scores_tile(const float* q, const float* rows, int64_t rs, int64_t D, float scale, float* s) {
    v8f a[NK] = {};
    int64_t c = 0;
    for (; c + 8 <= D; c += 8) {
        const v8f x = load8f(q + c);
        for (int kk = 0; kk < NK; ++kk) a[kk] += x * load8f(rows + kk * rs + c);
    }
    if constexpr (NK == 8) {
        auto pairs = [](v8f u, v8f w) {
            return __builtin_shufflevector(u, w, 0, 2, 8, 10, 4, 6, 12, 14) +
                   __builtin_shufflevector(u, w, 1, 3, 9, 11, 5, 7, 13, 15);
        };
        // Lane kk of u0 (u1): key kk's (kk + 4's) first four lanes summed; lane kk + 4: its last four.
        const v8f u0 = pairs(pairs(a[0], a[1]), pairs(a[2], a[3])), u1 = pairs(pairs(a[4], a[5]), pairs(a[6], a[7]));
        const v8f h = __builtin_shufflevector(u0, u1, 0, 1, 2, 3, 8, 9, 10, 11) +
                      __builtin_shufflevector(u0, u1, 4, 5, 6, 7, 12, 13, 14, 15);
        if (c == D) {
            store8f(s, h * scale);  // what the loop below gives, as one vector
            return;
        }
        for (int kk = 0; kk < 8; ++kk) s[kk] = score_tail(h[kk], q, rows + kk * rs, c, D) * scale;
    } else {
        s[0] = score_tail(tree8(a[0]), q, rows, c, D) * scale;
    }
}

// out[qi][c] += sum_jj p[qi][jj] * rows[jj * rs + c] for c in [0, D), jj in [0, nb), for NQ queries: each row
// loaded serves all of them.
template <int NQ>
STRATA_INLINE void values_tile(float* const (&out)[NQ], const float* const (&p)[NQ], const float* rows, int64_t rs,
                               int64_t nb, int64_t D) {
    constexpr int U = 8 / NQ;  // vectors of columns per pass: 8 accumulators
    int64_t c = 0;
    for (; c + 8 * U <= D; c += 8 * U) {
        v8f a[NQ][U];
        for (int qi = 0; qi < NQ; ++qi)
            for (int u = 0; u < U; ++u) a[qi][u] = load8f(out[qi] + c + 8 * u);
        for (int64_t jj = 0; jj < nb; ++jj) {
            v8f r[U];
            for (int u = 0; u < U; ++u) r[u] = load8f(rows + jj * rs + c + 8 * u);
            for (int qi = 0; qi < NQ; ++qi) {
                const float pj = p[qi][jj];
                for (int u = 0; u < U; ++u) a[qi][u] += pj * r[u];
            }
        }
        for (int qi = 0; qi < NQ; ++qi)
            for (int u = 0; u < U; ++u) store8f(out[qi] + c + 8 * u, a[qi][u]);
    }
    for (; c + 8 <= D; c += 8) {
        v8f a[NQ];
        for (int qi = 0; qi < NQ; ++qi) a[qi] = load8f(out[qi] + c);
        for (int64_t jj = 0; jj < nb; ++jj) {
            const v8f r = load8f(rows + jj * rs + c);
            for (int qi = 0; qi < NQ; ++qi) a[qi] += p[qi][jj] * r;
        }
        for (int qi = 0; qi < NQ; ++qi) store8f(out[qi] + c, a[qi]);
    }
    if (c < D) {
        // The last D % 8 columns as one vector padded with zeros: scalar code here, which the compiler vectorised
        // for some columns and not others, rounded the same sums differently in different tiles.
        const size_t bytes = static_cast<size_t>(D - c) * sizeof(float);
        v8f a[NQ] = {};
        for (int qi = 0; qi < NQ; ++qi) std::memcpy(&a[qi], out[qi] + c, bytes);
        for (int64_t jj = 0; jj < nb; ++jj) {
            v8f r = {};
            std::memcpy(&r, rows + jj * rs + c, bytes);
            for (int qi = 0; qi < NQ; ++qi) a[qi] += p[qi][jj] * r;
        }
        for (int qi = 0; qi < NQ; ++qi) std::memcpy(out[qi] + c, &a[qi], bytes);
    }
}

// e^x for x <= 0 (softmax's exponent after the maximum is taken off), eight at once: x = n ln 2 + r with
// |r| <= ln 2 / 2 (ln 2 in two parts), e^r by Cephes' polynomial, then 2^n put into the exponent. Within 1 ulp
// of the correctly rounded e^x for every float in [-87.3, 0] (checked exhaustively, with FMA and without). Below
// -87.3, where 2^n would leave the normal range, the result is 0 (-inf included); NaN stays NaN.
STRATA_INLINE v8f exp8_nonpositive(v8f x) {
    const v8f big = v8f{} + 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer, kept in the low bits
    const v8f t = x * 1.44269504088896341f + big;
    const v8f n = t - big;
    const v8f r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
    v8f y = v8f{} + 1.9875691500e-4f;
    y = y * r + 1.3981999507e-3f;
    y = y * r + 8.3334519073e-3f;
    y = y * r + 4.1665795894e-2f;
    y = y * r + 1.6666665459e-1f;
    y = y * r + 5.0000001201e-1f;
    y = y * (r * r) + r + 1.0f;
    const v8i k = as_i(t) - as_i(big);  // n as an integer
    const v8f e = y * as_f((k + 127) << 23);
    return x < -87.3f ? v8f{} : e;  // lane-wise select
}

// p[j] = e^(p[j] - max) / sum for j in [0, n), the sum taken in double. A NaN is not a maximum (as std::max).
STRATA_INLINE void softmax_row(float* p, int64_t n) {
    constexpr float inf = std::numeric_limits<float>::infinity();
    v8f m = v8f{} - inf;
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const v8f x = load8f(p + j);
        m = m < x ? x : m;
    }
    float mx = -inf;
    for (int u = 0; u < 8; ++u) mx = std::max(mx, m[u]);
    for (; j < n; ++j) mx = std::max(mx, p[j]);
    v4d s0 = {}, s1 = {};
    auto add = [&](v8f e) {
        s0 += __builtin_convertvector(__builtin_shufflevector(e, e, 0, 1, 2, 3), v4d);
        s1 += __builtin_convertvector(__builtin_shufflevector(e, e, 4, 5, 6, 7), v4d);
    };
    for (j = 0; j + 8 <= n; j += 8) {
        const v8f e = exp8_nonpositive(load8f(p + j) - mx);
        store8f(p + j, e);
        add(e);
    }
    if (j < n) {  // the last few, padded with -inf (whose e^x is 0)
        v8f x = v8f{} - inf;
        for (int64_t u = 0; u < n - j; ++u) x[u] = p[j + u] - mx;
        const v8f e = exp8_nonpositive(x);
        for (int64_t u = 0; u < n - j; ++u) p[j + u] = e[u];
        add(e);
    }
    const v4d s = s0 + s1;
    const float inv = static_cast<float>(1.0 / ((s[0] + s[1]) + (s[2] + s[3])));
    for (j = 0; j < n; ++j) p[j] *= inv;
}

// A 2 x 4 tile: two widened weight rows against four token rows, eight partial sums in registers, so each
// loaded weight vector is used four times and each token vector twice.
STRATA_INLINE void tile_2x4(const float* w0, const float* w1, const float* x0, const float* x1, const float* x2,
                            const float* x3, int64_t n, float* s /* [8]: s[2*t + row] */) {
    v8f a00 = {}, a01 = {}, a10 = {}, a11 = {}, a20 = {}, a21 = {}, a30 = {}, a31 = {};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        v8f u0, u1, y;
        std::memcpy(&u0, w0 + i, sizeof u0);
        std::memcpy(&u1, w1 + i, sizeof u1);
        std::memcpy(&y, x0 + i, sizeof y);
        a00 += u0 * y;
        a01 += u1 * y;
        std::memcpy(&y, x1 + i, sizeof y);
        a10 += u0 * y;
        a11 += u1 * y;
        std::memcpy(&y, x2 + i, sizeof y);
        a20 += u0 * y;
        a21 += u1 * y;
        std::memcpy(&y, x3 + i, sizeof y);
        a30 += u0 * y;
        a31 += u1 * y;
    }
    s[0] = hsum(a00), s[1] = hsum(a01), s[2] = hsum(a10), s[3] = hsum(a11);
    s[4] = hsum(a20), s[5] = hsum(a21), s[6] = hsum(a30), s[7] = hsum(a31);
    for (; i < n; ++i) {
        s[0] += w0[i] * x0[i], s[1] += w1[i] * x0[i];
        s[2] += w0[i] * x1[i], s[3] += w1[i] * x1[i];
        s[4] += w0[i] * x2[i], s[5] += w1[i] * x2[i];
        s[6] += w0[i] * x3[i], s[7] += w1[i] * x3[i];
    }
}

[[noreturn]] void unsupported(const TensorView& w) {
    throw UnsupportedError("not supported yet: " + std::string(dtype_name(w.dtype)) + " in " +
                           (w.source_name.empty() ? w.name : w.source_name) + " (CPU backend)");
}

STRATA_SIMD_CLONES void widen_dispatch(DType t, const std::byte* p, float* out, int64_t n) {
    switch (t) {
        case DType::F32: widen_impl<LoadF32>(p, out, n); return;
        case DType::BF16: widen_impl<LoadBF16>(p, out, n); return;
        case DType::F16: widen_impl<LoadF16>(p, out, n); return;
        default: return;
    }
}

STRATA_SIMD_CLONES void matvec_dispatch(const TensorView& w, const float* x, float* out, int64_t r0, int64_t r1) {
    switch (w.dtype) {
        case DType::F32: matvec_impl<LoadF32>(w, x, out, r0, r1); return;
        case DType::BF16: matvec_impl<LoadBF16>(w, x, out, r0, r1); return;
        case DType::F16: matvec_impl<LoadF16>(w, x, out, r0, r1); return;
        default: return;
    }
}

STRATA_SIMD_CLONES void tiles_dispatch(const float* wblock, int64_t nrows, const float* x, int64_t T, int64_t n,
                                        float* out, int64_t out_stride, int64_t r_base) {
    // wblock: [nrows, n] widened rows r_base.. ; x: [T, n]; out: [T, out_stride]
    int64_t t = 0;
    for (; t + 4 <= T; t += 4) {
        const float* x0 = x + t * n;
        int64_t j = 0;
        for (; j + 2 <= nrows; j += 2) {
            float s[8];
            tile_2x4(wblock + j * n, wblock + (j + 1) * n, x0, x0 + n, x0 + 2 * n, x0 + 3 * n, n, s);
            for (int q = 0; q < 4; ++q) {
                out[(t + q) * out_stride + r_base + j] = s[2 * q];
                out[(t + q) * out_stride + r_base + j + 1] = s[2 * q + 1];
            }
        }
        for (; j < nrows; ++j)
            for (int q = 0; q < 4; ++q)
                out[(t + q) * out_stride + r_base + j] = dot_impl(wblock + j * n, x0 + q * n, n);
    }
    for (; t < T; ++t)
        for (int64_t j = 0; j < nrows; ++j) out[t * out_stride + r_base + j] = dot_impl(wblock + j * n, x + t * n, n);
}

STRATA_SIMD_CLONES void attend_dispatch(const QueryTile& t, const KvHead& k, const KvHead& v, float scale,
                                        CpuIsa isa) {
    thread_local std::vector<float> wide;  // [block, D]: a block of rows, copied or widened
    thread_local std::vector<const float*> qs;
    thread_local std::vector<float*> outs, ps;  // ps: each query's probabilities from the block's first key
    thread_local std::vector<int64_t> nk;
    const int64_t D = t.D, M = t.Qn * t.G, n_max = t.n0 + t.Qn - 1;
    const int64_t block = std::max<int64_t>(1, kKvBlockFloats / D);
    wide.resize(static_cast<size_t>(block * D));
    qs.resize(static_cast<size_t>(M)), ps.resize(static_cast<size_t>(M));
    outs.resize(static_cast<size_t>(M)), nk.resize(static_cast<size_t>(M));
    // Query m is head m % G of token m / G.
    auto n_of = [&](int64_t m) { return t.n0 + m / t.G; };
    for (int64_t m = 0; m < M; ++m) {
        qs[m] = t.q + m / t.G * t.q_tok + m % t.G * t.q_head;
        outs[m] = t.out + m / t.G * t.q_tok + m % t.G * t.q_head;
    }
    auto p_of = [&](int64_t m) { return t.probs + m / t.G * t.p_tok + m % t.G * t.p_head; };
#ifdef STRATA_HAVE_F16C
    const bool avx512 = isa == CpuIsa::Avx512Vnni && D % 16 == 0;
#else
    const bool avx512 = false;
#endif
    // A float32 cache's rows are copied into L1 for a prompt's tiles, read in place for a decode step's query
    // (one token: each row used by its few heads, straight from memory; copied, decode after 2048 tokens was 10-20%
    // slower).
    const bool copy = t.Qn > 1;
    for (int64_t j0 = 0; j0 < n_max; j0 += block) {  // scores
        const int64_t nb = std::min(block, n_max - j0);
        int64_t rs = 0;
        const float* rows = kv_rows(k, j0, nb, D, copy, wide.data(), &rs, isa);
        if (avx512) {  // every query against every key of the block; past a query's own keys, unused
            for (int64_t m = 0; m < M; ++m) ps[m] = p_of(m) + j0;
            avx512::attention_scores(qs.data(), M, rows, rs, nb, D, scale, ps.data());
            continue;
        }
        for (int64_t m = 0; m < M; ++m) {
            const int64_t n = std::min(nb, n_of(m) - j0);
            float* s = p_of(m) + j0;
            int64_t jj = 0;
            for (; jj + 8 <= n; jj += 8) scores_tile<8>(qs[m], rows + jj * rs, rs, D, scale, s + jj);
            for (; jj < n; ++jj) scores_tile<1>(qs[m], rows + jj * rs, rs, D, scale, s + jj);
        }
    }
    for (int64_t m = 0; m < M; ++m) {
        softmax_row(p_of(m), n_of(m));
        std::fill(outs[m], outs[m] + D, 0.0f);
    }
    for (int64_t j0 = 0; j0 < n_max; j0 += block) {  // the weighted sums of the values
        const int64_t nb = std::min(block, n_max - j0);
        int64_t rs = 0;
        const float* rows = kv_rows(v, j0, nb, D, copy, wide.data(), &rs, isa);
        for (int64_t m = 0; m < M; ++m) {
            ps[m] = p_of(m) + j0;
            nk[m] = std::clamp<int64_t>(n_of(m) - j0, 0, nb);
        }
        if (avx512) {
            avx512::attention_values(outs.data(), ps.data(), nk.data(), M, rows, rs, D);
            continue;
        }
        // Four queries at a time, for a prompt; where the later ones see more keys (the next tokens), each goes on
        // alone. A decode step's rows, read in place from memory, go through one query at a time, whole rows at once
        // (four queries a quarter of a row at a time made decode after 2048 tokens 15-20% slower).
        int64_t m = 0;
        for (; copy && m + 4 <= M; m += 4) {
            values_tile<4>({outs[m], outs[m + 1], outs[m + 2], outs[m + 3]}, {ps[m], ps[m + 1], ps[m + 2], ps[m + 3]},
                           rows, rs, nk[m], D);
            for (int64_t i = m + 1; i < m + 4; ++i)
                values_tile<1>({outs[i]}, {ps[i] + nk[m]}, rows + nk[m] * rs, rs, nk[i] - nk[m], D);
        }
        for (; m < M; ++m) values_tile<1>({outs[m]}, {ps[m]}, rows, rs, nk[m], D);
    }
}

}  // namespace

bool supported(DType t) {
    switch (t) {
        case DType::F32:
        case DType::F16:
        case DType::BF16:
        case DType::Q8_0:
        case DType::Q4_0:
        case DType::Q4_K:
        case DType::Q5_K:
        case DType::Q6_K: return true;
    }
    return false;
}

void widen_row(const TensorView& w, int64_t r, float* out, CpuIsa isa) {
    if (!supported(w.dtype)) unsupported(w);
    const std::byte* p = w.shape.size() < 2 ? w.data : w.row_ptr(r);
    if (dtype_is_block(w.dtype)) {
        quant::dequantize(w.dtype, p, out, w.cols());  // one row: prefill scratch, embedding lookup
        return;
    }
#ifdef STRATA_HAVE_F16C
    if (w.dtype == DType::F16 && isa != CpuIsa::Generic) return f16c::widen(p, out, w.cols());
    if (w.dtype == DType::BF16 && isa != CpuIsa::Generic) return f16c::widen_bf16(p, out, w.cols());
#endif
    (void)isa;
    widen_dispatch(w.dtype, p, out, w.cols());
}

void widen_f16(const uint16_t* h, float* out, int64_t n, CpuIsa isa) {
    const auto* p = reinterpret_cast<const std::byte*>(h);
#ifdef STRATA_HAVE_F16C
    if (isa != CpuIsa::Generic) return f16c::widen(p, out, n);
#endif
    (void)isa;
    widen_dispatch(DType::F16, p, out, n);
}

void attend_heads(const QueryTile& t, const KvHead& k, const KvHead& v, float scale, CpuIsa isa) {
    attend_dispatch(t, k, v, scale, isa);
}

void matvec(const TensorView& w, const float* x, float* out, int64_t r0, int64_t r1, CpuIsa isa) {
    if (!supported(w.dtype)) unsupported(w);
    if (dtype_is_block(w.dtype)) {
        // Blocks are decoded inside the dot product, a super-block at a time; activations stay float32.
        const int64_t n = w.cols();
        for (int64_t r = r0; r < r1; ++r) out[r] = quant::dot(w.dtype, w.row_ptr(r), x, n, isa);
        return;
    }
#ifdef STRATA_HAVE_F16C
    if (w.dtype == DType::F16 && isa == CpuIsa::Avx512Vnni) return avx512::matvec_f16(w, x, out, r0, r1);
    if (w.dtype == DType::F16 && isa != CpuIsa::Generic) return f16c::matvec(w, x, out, r0, r1);
    // BF16 (Hugging Face checkpoints): the generic loop's widening compiles to 128-bit halves and stack traffic.
    static const int ahead = cpu_prefetch_ahead();
    if (w.dtype == DType::BF16 && isa == CpuIsa::Avx512Vnni) return avx512::matvec_bf16(w, x, out, r0, r1, ahead);
    if (w.dtype == DType::BF16 && isa != CpuIsa::Generic) return f16c::matvec_bf16(w, x, out, r0, r1);
#endif
    (void)isa;
    matvec_dispatch(w, x, out, r0, r1);
}

float half_scale(float amax) {
    return amax > 0 ? std::ldexp(1.0f, std::min(14 - std::ilogb(amax), 126)) : 1.0f;  // 2^126: still normal
}

float half_activations(const float* x, int64_t n, std::vector<uint16_t>& xh, CpuIsa isa) {
#ifdef STRATA_HAVE_F16C
    if (isa == CpuIsa::Generic) return 0;
    xh.resize(static_cast<size_t>(n));
    return isa == CpuIsa::Avx512Vnni ? avx512::to_f16(x, xh.data(), n) : f16c::to_f16(x, xh.data(), n);
#else
    (void)x, (void)n, (void)xh, (void)isa;
    return 0;
#endif
}

void matvec_f16_h(const TensorView& w, const uint16_t* xh, float scale, float* out, int64_t r0, int64_t r1,
                  CpuIsa isa) {
    const float unscale = 1.0f / scale;  // a power of two: exact
    // The 512-bit kernel reads one row at a time, prefetching `ahead` bytes (not on the CPUs that prefetch whole
    // rows for the block types, Intel, where it was not measured); the 256-bit one four rows at a time, without.
    static const int ahead = cpu_prefetch_ahead();
#ifdef STRATA_HAVE_F16C
    if (isa == CpuIsa::Avx512Vnni) return avx512::matvec_f16_h(w, xh, unscale, out, r0, r1, ahead);
    return f16c::matvec_h(w, xh, unscale, out, r0, r1);
#else
    (void)w, (void)xh, (void)unscale, (void)out, (void)r0, (void)r1, (void)isa, (void)ahead;
    throw Error("cpu backend: no binary16 activation kernel on this CPU");
#endif
}

// Prefill's tile of tokens on the float path: this many bytes of x.
constexpr int64_t kPrefillTileBytes = 524288;

void matmul_rows(const TensorView& w, const float* x, int64_t T, float* out, int64_t r0, int64_t r1,
                 float* scratch, CpuIsa isa) {
    const int64_t n = w.cols();
    const int64_t rows = w.rows();
    // A long prompt's tokens go in tiles of about kPrefillTileBytes of x (at least 96 tokens, so that the rows'
    // widening, done again per tile, stays a small part; a prompt of up to 96 is one pass), each tile against
    // every row block of the range, so that the tile's x stays in L2 or L3 instead of all T tokens' (tens of
    // megabytes at thousands of tokens) coming from memory again for every block of 8 rows. Tiles are of equal
    // size in multiples of 12 tokens, so the kernels' groups of 4 or 6 tokens, and the bits, are those of one
    // pass.
    const int64_t most = std::max<int64_t>(96, kPrefillTileBytes / (4 * n)), tiles = (T + most - 1) / most;
    const int64_t tile = ((T + tiles - 1) / tiles + 11) / 12 * 12;
    for (int64_t t0 = 0; t0 < T; t0 += tile) {
        const int64_t nt = std::min(tile, T - t0);
        const float* xt = x + t0 * n;
        float* ot = out + t0 * rows;
        for (int64_t rb = r0; rb < r1; rb += kRowBlock) {
            const int64_t nrows = std::min<int64_t>(kRowBlock, r1 - rb);
            for (int64_t j = 0; j < nrows; ++j) widen_row(w, rb + j, scratch + j * n, isa);  // [nrows, n]
#ifdef STRATA_HAVE_F16C
            if (isa == CpuIsa::Avx512Vnni) {
                avx512::tiles(scratch, nrows, xt, nt, n, ot, rows, rb);
                continue;
            }
#endif
            tiles_dispatch(scratch, nrows, xt, nt, n, ot, rows, rb);
        }
    }
}

void matmul_q8_rows(const TensorView& w, const quant::Q8Activations& x, int64_t T, float* out, int64_t r0,
                    int64_t r1, CpuIsa isa, int group) {
    const int64_t n = w.cols(), rows = w.rows();
    if (w.rope_heads == 0)  // rows in storage order: the whole range in one call, which prefetches as it goes
        return quant::dot_q8_matrix(w.dtype, w.data, r0, r1, x, T, n, isa, out, rows, group);
    if (group != 1) throw Error("cpu backend: " + w.name + ": permuted rows stored in groups");
    for (int64_t r = r0; r < r1; ++r)  // rows permuted (Hugging Face wq / wk): each row a range of its own
        quant::dot_q8_matrix(w.dtype, w.row_ptr(r), 0, 1, x, T, n, isa, out + r, rows);
}

}  // namespace strata::cpu
