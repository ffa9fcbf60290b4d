// The integer-dot path (strata/quant.hpp): activations quantized to 8-bit blocks of 32, and each block-type row's
// dot product as exact integer sums scaled once per unit of 32 weights. The generic kernels below are plain
// scalar C++ (any CPU, and the easiest statement of the arithmetic); the x86 ones (dot_q8_x86.inc) are compiled
// once per instruction set and chosen by the caller's CpuIsa, which the CPU must support.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "quant/blocks.hpp"
#include "strata/error.hpp"
#include "strata/quant.hpp"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define STRATA_X86_KERNELS 1
#include <immintrin.h>
#define STRATA_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define STRATA_SIMD_CLONES
#endif

namespace strata::quant {

namespace {

// Q8Activations::dk's order of the eight blocks of a super-block, the 256-bit K kernels' order of its scales.
constexpr int kPairOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};

// ---------- generic kernels ----------

int dot_levels(const uint8_t* u, const int8_t* s, int n) {  // n unsigned levels times n signed activations
    int sum = 0;
    for (int i = 0; i < n; ++i) sum += int(u[i]) * int(s[i]);
    return sum;
}
int dot_signed(const int8_t* w, const int8_t* s, int n) {
    int sum = 0;
    for (int i = 0; i < n; ++i) sum += int(w[i]) * int(s[i]);
    return sum;
}

float q8_0(const uint8_t* b, const int8_t* a, const float* ad, int64_t nb) {
    float acc = 0;
    for (int64_t k = 0; k < nb; ++k, b += 34, a += 32)
        acc += blocks::half(b) * ad[k] * static_cast<float>(dot_signed(reinterpret_cast<const int8_t*>(b + 2), a, 32));
    return acc;
}

float q4_0(const uint8_t* b, const int8_t* a, const float* ad, int64_t nb) {
    float acc = 0;
    int8_t w[32];
    for (int64_t k = 0; k < nb; ++k, b += 18, a += 32) {
        for (int j = 0; j < 16; ++j) w[j] = int8_t((b[2 + j] & 15) - 8), w[j + 16] = int8_t((b[2 + j] >> 4) - 8);
        acc += blocks::half(b) * ad[k] * static_cast<float>(dot_signed(w, a, 32));
    }
    return acc;
}

template <bool kFive>
float qk_affine(const uint8_t* b, const int8_t* a, const float* ad, const float* as32, int64_t nb) {
    constexpr int64_t kBytes = kFive ? 176 : 144;
    float acc = 0, mins = 0;
    uint8_t q[32];
    for (int64_t k = 0; k < nb; ++k, b += kBytes, a += 256, ad += 8, as32 += 8) {
        const float d = blocks::half(b), dmin = blocks::half(b + 2);
        const uint8_t* qh = b + 16;
        const uint8_t* qs = b + (kFive ? 48 : 16);
        for (int j = 0; j < 8; ++j) {  // sub-block j: chunk j / 2, low nibbles for even j
            int sc, m;
            blocks::scale_min(b + 4, j, sc, m);
            for (int l = 0; l < 32; ++l) {
                const uint8_t byte = qs[32 * (j / 2) + l];
                q[l] = j % 2 ? byte >> 4 : byte & 15;
                if constexpr (kFive) q[l] |= ((qh[l] >> j) & 1) << 4;
            }
            acc += d * static_cast<float>(sc) * ad[j] * static_cast<float>(dot_levels(q, a + 32 * j, 32));
            mins += dmin * static_cast<float>(m) * as32[j];
        }
    }
    return acc - mins;
}

float q6_k(const uint8_t* b, const int8_t* a, const float* ad, int64_t nb) {
    float acc = 0;
    int8_t w[256];
    for (int64_t k = 0; k < nb; ++k, b += 210, a += 256, ad += 8) {
        const float d = blocks::half(b + 208);
        const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
        for (int h = 0; h < 2; ++h)
            for (int l = 0; l < 32; ++l) {
                const uint8_t l0 = b[64 * h + l], l1 = b[64 * h + l + 32], hb = b[128 + 32 * h + l];
                w[128 * h + l] = int8_t(((l0 & 15) | ((hb & 3) << 4)) - 32);
                w[128 * h + l + 32] = int8_t(((l1 & 15) | (((hb >> 2) & 3) << 4)) - 32);
                w[128 * h + l + 64] = int8_t(((l0 >> 4) | (((hb >> 4) & 3) << 4)) - 32);
                w[128 * h + l + 96] = int8_t(((l1 >> 4) | (((hb >> 6) & 3) << 4)) - 32);
            }
        for (int j = 0; j < 16; ++j)  // scale j: weights 16j .. 16j + 15
            acc += d * ad[j / 2] * static_cast<float>(sc[j]) * static_cast<float>(dot_signed(w + 16 * j, a + 16 * j, 16));
    }
    return acc;
}

float dot_generic(DType t, const uint8_t* row, const Q8Activations& x, int64_t first, int64_t n) {
    const int8_t* a = x.q.data() + first;
    const float* ad = x.d.data() + first / 32;
    switch (t) {
        case DType::Q8_0: return q8_0(row, a, ad, n / 32);
        case DType::Q4_0: return q4_0(row, a, ad, n / 32);
        case DType::Q4_K: return qk_affine<false>(row, a, ad, x.sum32.data() + first / 32, n / 256);
        case DType::Q5_K: return qk_affine<true>(row, a, ad, x.sum32.data() + first / 32, n / 256);
        case DType::Q6_K: return q6_k(row, a, ad, n / 256);
        default: return 0.0f;
    }
}

// Blocks of 32: d = max|x| / 127, q = round-to-even(x / d). Cloned so the loops vectorise.
STRATA_SIMD_CLONES void quantize_blocks(const float* x, int64_t nb, int8_t* q, float* d, float* sum32,
                                        int16_t* pair32, uint8_t* qu) {
    for (int64_t k = 0; k < nb; ++k, x += 32, q += 32, pair32 += 16, qu += 32) {
        float amax = 0;
        bool nan = false;  // std::max passes over a NaN (every comparison with it is false): looked for apart
        for (int i = 0; i < 32; ++i) {
            amax = std::max(amax, std::fabs(x[i]));
            nan |= x[i] != x[i];
        }
        // NaN / Inf in x: every dot with this block becomes NaN, as the exact path's (a NaN used to pass as a
        // level of 0 and an all-NaN block as d = 0: finite results from NaN activations).
        if (nan || !std::isfinite(amax)) {
            std::memset(q, 0, 32);
            std::memset(pair32, 0, 32);
            std::memset(qu, 0x80, 32);
            d[k] = sum32[k] = std::numeric_limits<float>::quiet_NaN();
            continue;
        }
        const float dk = amax / 127.0f, inv = amax > 0 ? 127.0f / amax : 0.0f;
        // amax so small (below ~3.7e-37) that 127 / amax overflows: x / dk instead of x * inf (whose infinities and
        // NaNs became levels of 0 and an int overflow in the sum), clamped, as dk is then a subnormal.
        const bool tiny = !std::isfinite(inv);
        int sum = 0;
        for (int i = 0; i < 32; ++i) {
            const float r = !tiny ? x[i] * inv : dk > 0 ? x[i] / dk : 0.0f;
            const int v = std::clamp(static_cast<int>(__builtin_roundevenf(r)), -127, 127);
            q[i] = static_cast<int8_t>(v);
            sum += v;
        }
        d[k] = dk;
        sum32[k] = dk * static_cast<float>(sum);
        for (int i = 0; i < 16; ++i) pair32[i] = static_cast<int16_t>(32 * (q[2 * i] + q[2 * i + 1]));
        for (int i = 0; i < 32; ++i) qu[i] = static_cast<uint8_t>(q[i] + 128);
    }
}

#ifdef STRATA_X86_KERNELS
// quantize_blocks on AVX2, the same values (the compiler's clone of it above took ~150 cycles per block of 32, and
// a prompt's products quantize their activations before they split the rows among the threads): the levels of
// eight elements rounded to even at once and packed to bytes, the pair sums by one vpmaddubsw. A block with a NaN
// or an infinity, or so small that 127 / amax overflows, goes through quantize_blocks.
__attribute__((target("avx2,fma"))) void quantize_blocks_avx2(const float* x, int64_t nb, int8_t* q, float* d,
                                                             float* sum32, int16_t* pair32, uint8_t* qu) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7), ones = _mm256_set1_epi8(1);
    for (int64_t k = 0; k < nb; ++k, x += 32, q += 32, pair32 += 16, qu += 32) {
        __m256 v[4], unordered = _mm256_setzero_ps(), m = _mm256_setzero_ps();
        for (int j = 0; j < 4; ++j) {
            v[j] = _mm256_loadu_ps(x + 8 * j);
            unordered = _mm256_or_ps(unordered, _mm256_cmp_ps(v[j], v[j], _CMP_UNORD_Q));
            m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[j]));
        }
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        const float amax = _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
        const float inv = amax > 0 ? 127.0f / amax : 0.0f;
        if (_mm256_movemask_ps(unordered) != 0 || !std::isfinite(amax) || !std::isfinite(inv)) {
            quantize_blocks(x, 1, q, d + k, sum32 + k, pair32, qu);
            continue;
        }
        __m256i l[4];
        for (int j = 0; j < 4; ++j)
            l[j] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[j], _mm256_set1_ps(inv)),
                                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        // Bytes in the order of the 32-bit groups 0, 4, 1, 5, 2, 6, 3, 7 after the two packs: put back.
        const __m256i b = _mm256_permutevar8x32_epi32(
            _mm256_packs_epi16(_mm256_packs_epi32(l[0], l[1]), _mm256_packs_epi32(l[2], l[3])), order);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), b);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(qu), _mm256_xor_si256(b, _mm256_set1_epi8(-128)));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(pair32), _mm256_slli_epi16(_mm256_maddubs_epi16(ones, b), 5));
        __m256i s = _mm256_add_epi32(_mm256_add_epi32(l[0], l[1]), _mm256_add_epi32(l[2], l[3]));
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
        d[k] = amax / 127.0f;
        sum32[k] = d[k] * static_cast<float>(_mm_cvtsi128_si32(s4));
    }
}
#endif

}  // namespace

#ifdef STRATA_X86_KERNELS
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
namespace avx2 {
#define STRATA_DOT4(u, s) _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1))
#define STRATA_DOT4X2(u0, s0, u1, s1)                                                                \
    _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(u0, s0), _mm256_maddubs_epi16(u1, s1)), \
                      _mm256_set1_epi16(1))
#define STRATA_X86_MADDUBS 1
#include "quant/dot_q8_x86.inc"
#undef STRATA_X86_MADDUBS
#undef STRATA_DOT4X2
#undef STRATA_DOT4
}  // namespace avx2
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")
namespace avx512_vnni {
#define STRATA_DOT4(u, s) _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s)
#define STRATA_DOT4X2(u0, s0, u1, s1) _mm256_dpbusd_epi32(STRATA_DOT4(u0, s0), u1, s1)
#define STRATA_X86_512 1
// GCC 12's 512-bit insert / permute / convert intrinsics pass an undefined vector as their merge source and warn
// that it "may be used uninitialized" wherever they are inlined (GCC bug 105593, fixed in 13).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "quant/dot_q8_x86.inc"
#pragma GCC diagnostic pop
#undef STRATA_X86_512
#undef STRATA_DOT4X2
#undef STRATA_DOT4
}  // namespace avx512_vnni
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avxvnni")
namespace avx_vnni {
#define STRATA_DOT4(u, s) _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s)
#define STRATA_DOT4X2(u0, s0, u1, s1) _mm256_dpbusd_avx_epi32(STRATA_DOT4(u0, s0), u1, s1)
#include "quant/dot_q8_x86.inc"
#undef STRATA_DOT4X2
#undef STRATA_DOT4
}  // namespace avx_vnni
#pragma GCC pop_options

// The same 256-bit kernels with the EVEX form of vpdpbusd (AVX512-VNNI + VL): CpuIsa::AvxVnni on a CPU that has
// AVX-512 and not AVX-VNNI, such as AMD Zen 4 (the same instruction on the same registers, so the same bits).
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")
namespace avx_vnni_evex {
#define STRATA_DOT4(u, s) _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s)
#define STRATA_DOT4X2(u0, s0, u1, s1) _mm256_dpbusd_epi32(STRATA_DOT4(u0, s0), u1, s1)
#include "quant/dot_q8_x86.inc"
#undef STRATA_DOT4X2
#undef STRATA_DOT4
}  // namespace avx_vnni_evex
#pragma GCC pop_options

namespace {
// Whether CpuIsa::AvxVnni runs in its VEX form (the CPU has AVX-VNNI) or its EVEX one (cpu_isa_supported).
bool avx_vnni_vex() {
    static const bool vex = __builtin_cpu_supports("avxvnni");
    return vex;
}
}  // namespace
#endif

bool has_integer_dot(DType t) {
    return t == DType::Q8_0 || t == DType::Q4_0 || t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K;
}

// Q8Activations::qv's order of the quarters of 16 in each 128.
constexpr int kQuarters[8] = {0, 4, 2, 6, 1, 5, 3, 7};

void quantize_activations(const float* x, int64_t n, Q8Activations& out, CpuIsa isa) {
    if (n < 0 || n % 32 != 0)
        throw Error("quant::quantize_activations: " + std::to_string(n) + " is not a multiple of 32");
    out.n = n;
    out.q.resize(static_cast<size_t>(n));
    out.d.resize(static_cast<size_t>(n / 32));
    out.sum32.resize(static_cast<size_t>(n / 32));
    out.pair32.resize(static_cast<size_t>(n / 2));
    out.qu.resize(static_cast<size_t>(n));
#ifdef STRATA_X86_KERNELS
    if (isa != CpuIsa::Generic)  // every x86 set has AVX2
        quantize_blocks_avx2(x, n / 32, out.q.data(), out.d.data(), out.sum32.data(), out.pair32.data(),
                             out.qu.data());
    else
#else
    (void)isa;
#endif
        quantize_blocks(x, n / 32, out.q.data(), out.d.data(), out.sum32.data(), out.pair32.data(),
                        out.qu.data());
    out.qk.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; i += 64) {
        const int64_t m = std::min<int64_t>(64, n - i);  // a last 32 stays as it is
        std::memcpy(out.qk.data() + i, out.q.data() + i, 16);
        if (m == 64) {
            std::memcpy(out.qk.data() + i + 16, out.q.data() + i + 32, 16);
            std::memcpy(out.qk.data() + i + 32, out.q.data() + i + 16, 16);
            std::memcpy(out.qk.data() + i + 48, out.q.data() + i + 48, 16);
        } else {
            std::memcpy(out.qk.data() + i + 16, out.q.data() + i + 16, 16);
        }
    }
    out.qv.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; i += 128) {
        const int64_t m = std::min<int64_t>(128, n - i);  // a last 32, 64 or 96 stays as it is
        for (int64_t j = 0; j < m / 16; ++j)
            std::memcpy(out.qv.data() + i + 16 * j, out.q.data() + i + 16 * (m == 128 ? kQuarters[j] : j), 16);
    }
    out.dk.resize(out.d.size());
    for (size_t k = 0; k < out.d.size(); k += 8) {
        const size_t m = std::min<size_t>(8, out.d.size() - k);  // a last part of 8 stays as it is
        for (size_t j = 0; j < m; ++j) out.dk[k + j] = out.d[k + (m == 8 ? size_t(kPairOrder[j]) : j)];
    }
    out.d8.resize(static_cast<size_t>(n / 32 * 8));
    for (size_t k = 0; k < out.d.size(); ++k)
        std::fill_n(out.d8.begin() + static_cast<std::ptrdiff_t>(8 * k), 8, out.d[k]);
}

namespace {

void check_dot(DType t, const Q8Activations& x, int64_t first, int64_t n, int64_t end) {
    const int64_t bs = has_integer_dot(t) ? dtype_block_size(t) : 0;
    if (bs == 0 || n % bs != 0 || first % bs != 0 || first < 0 || end > x.n)
        throw Error("quant::dot_q8: " + std::to_string(n) + " weights of " + std::string(dtype_name(t)) +
                    " against activations [" + std::to_string(first) + ", " + std::to_string(end) + ") of " +
                    std::to_string(x.n));
}

}  // namespace

float dot_q8(DType t, const void* row, const Q8Activations& x, int64_t first, int64_t n, CpuIsa isa) {
    check_dot(t, x, first, n, first + n);
    const auto* b = static_cast<const uint8_t*>(row);
    switch (isa) {
#ifdef STRATA_X86_KERNELS
        case CpuIsa::Avx2: return avx2::dot_one(t, b, x, first, n);
        case CpuIsa::Avx512Vnni: return avx512_vnni::dot_one(t, b, x, first, n);
        case CpuIsa::AvxVnni:
            return avx_vnni_vex() ? avx_vnni::dot_one(t, b, x, first, n) : avx_vnni_evex::dot_one(t, b, x, first, n);
#endif
        default: return dot_generic(t, b, x, first, n);
    }
}

int decode_group(DType t, int64_t n, CpuIsa isa) {
    const bool grouped = t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K;
    return grouped && isa != CpuIsa::Generic && n > 10240 ? kGroupRows : 1;
}

namespace {
// The bytes of one block of type t (a K type's super-block).
uint64_t block_bytes_of(DType t) { return dtype_bytes(t, dtype_block_size(t)); }
}  // namespace

void interleave_rows(DType t, const void* src, int64_t rows, int64_t n, int group, void* dst) {
    if (group < 1 || rows % group != 0 || n % dtype_block_size(t) != 0)
        throw Error("quant::interleave_rows: " + std::to_string(rows) + " rows of " + std::to_string(n) +
                    " weights in groups of " + std::to_string(group));
    const uint64_t bb = block_bytes_of(t), row_bytes = dtype_bytes(t, n);
    const int64_t nb = n / dtype_block_size(t);
    const auto* s = static_cast<const uint8_t*>(src);
    auto* d = static_cast<uint8_t*>(dst);
    for (int64_t g = 0; g < rows; g += group)
        for (int i = 0; i < group; ++i)
            for (int64_t k = 0; k < nb; ++k)
                std::memcpy(d + g * row_bytes + (k * group + i) * bb, s + (g + i) * row_bytes + k * bb, bb);
}

void deinterleave_row(DType t, const void* src, int group, int i, int64_t n, void* dst) {
    const uint64_t bb = block_bytes_of(t);
    const int64_t nb = n / dtype_block_size(t);
    for (int64_t k = 0; k < nb; ++k)
        std::memcpy(static_cast<uint8_t*>(dst) + k * bb, static_cast<const uint8_t*>(src) + (k * group + i) * bb, bb);
}

void dot_q8_matrix(DType t, const void* base, int64_t r0, int64_t r1, const Q8Activations& x, int64_t T, int64_t n,
                   CpuIsa isa, float* out, int64_t out_stride, int group) {
    check_dot(t, x, 0, n, T * n);
    if (r0 < 0 || r1 < r0 || group < 1 || r0 % group != 0 || r1 % group != 0)
        throw Error("quant::dot_q8_matrix: rows [" + std::to_string(r0) + ", " + std::to_string(r1) +
                    ") in groups of " + std::to_string(group));
    if (T == 0 || r1 == r0) return;
    const auto* b = static_cast<const uint8_t*>(base);
    const uint64_t row_bytes = dtype_bytes(t, n);
#ifdef STRATA_X86_KERNELS
    // Decode's software prefetch: the next row on CPUs that want it, elsewhere a line ahead of the reads.
    static const bool prefetch = cpu_prefetch_rows();
    static const int ahead = cpu_prefetch_ahead();
#endif
#ifdef STRATA_X86_KERNELS
#define STRATA_DOT_MATRIX(set) \
    set::dot_matrix(t, b, row_bytes, r0, r1, x, T, n, out, out_stride, prefetch, ahead, group)
#endif
    switch (isa) {
#ifdef STRATA_X86_KERNELS
        case CpuIsa::Avx2: return STRATA_DOT_MATRIX(avx2);
        case CpuIsa::Avx512Vnni: return STRATA_DOT_MATRIX(avx512_vnni);
        case CpuIsa::AvxVnni: return avx_vnni_vex() ? STRATA_DOT_MATRIX(avx_vnni) : STRATA_DOT_MATRIX(avx_vnni_evex);
#undef STRATA_DOT_MATRIX
#endif
        default: {
            std::vector<uint8_t> copy(group > 1 ? row_bytes : 0);  // a grouped row, copied back
            for (int64_t r = r0; r < r1; ++r) {
                const uint8_t* row = b + r * row_bytes;
                if (group > 1) {
                    deinterleave_row(t, b + (r - r % group) * row_bytes, group, static_cast<int>(r % group), n,
                                     copy.data());
                    row = copy.data();
                }
                for (int64_t tok = 0; tok < T; ++tok) out[tok * out_stride + r] = dot_generic(t, row, x, tok * n, n);
            }
        }
    }
}

}  // namespace strata::quant
