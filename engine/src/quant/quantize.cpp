// Quantizers for ggml's block types (layouts in strata/quant.hpp). Written for this project from the format
// definition; the goal is a small squared error per block, found by a short search over scales:
//   Q8_0, Q4_0  one f16 scale per 32 weights, chosen so the largest magnitude is representable
//   Q4_K, Q5_K  per 32-weight sub-block an affine fit w ~ s*q - m (m >= 0) searched over a few scales, then
//               the 8 scales and mins quantized to 6 bits against two f16 super-scales, then every weight
//               re-quantized against the scale and min it will actually be decoded with
//   Q6_K        per 16-weight sub-block a symmetric fit w ~ s*q, q in [-32, 31], then the 16 scales to int8
// Every final weight is rounded against the decoded (f16-rounded) scales, so the stored q is the nearest level.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "quant/blocks.hpp"
#include "strata/error.hpp"
#include "strata/quant.hpp"

namespace strata::quant {

namespace {

// The largest f16 scale we write (65504, the largest finite f16).
constexpr float kMaxHalf = 65504.0f;

uint8_t* out_bytes(void* p) { return static_cast<uint8_t*>(p); }

void store_half(uint8_t* p, float v) {
    const uint16_t h = f32_to_f16(v);
    std::memcpy(p, &h, 2);
}
// The f16 rounding of v, as it will be decoded.
float round_half(float v) { return f16_to_f32(f32_to_f16(v)); }
// A super-block scale as stored: rounded to f16, but never rounded away to zero when v is not zero (weights so
// small that their scale is below the smallest f16 subnormal, 2^-24, still get the nearest non-zero scale; the
// sub-scales are then fitted against it).
float round_scale(float v) {
    const float r = round_half(v);
    if (r == 0.0f && v != 0.0f) return std::copysign(0x1p-24f, v);
    return r;
}

// The nearest integer level to v in [lo, hi] (halves round up). Truncation of a positive number is floor, which
// keeps this inline and branch-light; the search loops below call it millions of times per tensor.
inline int nearest(float v, int lo, int hi) {
    if (!(v > static_cast<float>(lo))) return lo;  // also NaN
    if (v >= static_cast<float>(hi)) return hi;
    return static_cast<int>(v - static_cast<float>(lo) + 0.5f) + lo;
}

// ---------- Q8_0 / Q4_0 ----------

void block_q8_0(const float* x, uint8_t* b) {
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = round_scale(amax / 127.0f);
    store_half(b, d);
    auto* qs = reinterpret_cast<int8_t*>(b + 2);
    for (int i = 0; i < 32; ++i) qs[i] = static_cast<int8_t>(d == 0.0f ? 0 : nearest(x[i] / d, -127, 127));
}

void block_q4_0(const float* x, uint8_t* b) {
    // The weight of largest magnitude becomes level -8 (the asymmetric end), the rest fit in [-8, 7].
    float amax = 0.0f, extreme = 0.0f;
    for (int i = 0; i < 32; ++i)
        if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), extreme = x[i];
    const float d = round_scale(extreme / -8.0f);
    store_half(b, d);
    uint8_t* qs = b + 2;
    for (int j = 0; j < 16; ++j) {
        const int q0 = d == 0.0f ? 8 : nearest(x[j] / d, -8, 7) + 8;
        const int q1 = d == 0.0f ? 8 : nearest(x[j + 16] / d, -8, 7) + 8;
        qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
}

// ---------- K types ----------

// An affine fit of n weights to levels 0..L: w ~ scale * q - offset, offset >= 0 (the sub-block's minimum is
// never above zero, as ggml's K quantizers require). Tries scales around (max - min) / L, refits scale and
// offset by least squares for each level assignment, keeps the smallest squared error.
struct Affine {
    float scale = 0.0f;
    float offset = 0.0f;  // >= 0
};

Affine fit_affine(const float* x, int n, int L) {
    float lo = x[0], hi = x[0];
    for (int i = 1; i < n; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
    lo = std::min(lo, 0.0f);
    if (hi <= lo) return {0.0f, -lo};  // constant block (all equal, <= 0)
    Affine best{(hi - lo) / static_cast<float>(L), -lo};
    float best_err = 0;
    for (int i = 0; i < n; ++i) {
        const float e = best.scale * static_cast<float>(nearest((x[i] - lo) / best.scale, 0, L)) - best.offset - x[i];
        best_err += e * e;
    }
    float sx = 0;
    for (int i = 0; i < n; ++i) sx += x[i];
    int q[32];
    for (int step = -8; step <= 8; ++step) {
        const float iscale = (static_cast<float>(L) + 0.1f * static_cast<float>(step)) / (hi - lo);
        float sq = 0, sqq = 0, sxq = 0;
        for (int i = 0; i < n; ++i) {
            q[i] = nearest((x[i] - lo) * iscale, 0, L);
            const float fq = static_cast<float>(q[i]);
            sq += fq;
            sqq += fq * fq;
            sxq += x[i] * fq;
        }
        // Least squares for w = s*q + c (c = -offset).
        const float det = static_cast<float>(n) * sqq - sq * sq;
        if (det <= 0) continue;
        float s = (static_cast<float>(n) * sxq - sq * sx) / det;
        float c = (sx - s * sq) / static_cast<float>(n);
        if (c > 0) {  // the offset must stay >= 0: refit the scale alone with c = 0
            c = 0;
            s = sqq > 0 ? sxq / sqq : 0;
        }
        if (!(s > 0)) continue;
        float err = 0;
        for (int i = 0; i < n; ++i) {
            const float e = s * static_cast<float>(q[i]) + c - x[i];
            err += e * e;
        }
        if (err < best_err) {
            best_err = err;
            best = {s, -c};
        }
    }
    return best;
}

// Packs eight 6-bit scales and mins into the 12 bytes blocks::scale_min reads.
void pack_scales(const int* sc, const int* m, uint8_t* s) {
    std::memset(s, 0, 12);
    for (int j = 0; j < 8; ++j) {
        if (j < 4) {
            s[j] |= static_cast<uint8_t>(sc[j] & 63);
            s[j + 4] |= static_cast<uint8_t>(m[j] & 63);
        } else {
            s[j + 4] = static_cast<uint8_t>((sc[j] & 0x0f) | ((m[j] & 0x0f) << 4));
            s[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
            s[j] |= static_cast<uint8_t>((m[j] >> 4) << 6);
        }
    }
}

// The common part of Q4_K and Q5_K: sub-block fits, 6-bit scales, and the final level of every weight.
void k_affine(const float* x, uint8_t* b, int L, int* levels /* [256] */) {
    Affine fit[8];
    float max_scale = 0.0f, max_offset = 0.0f;
    for (int j = 0; j < 8; ++j) {
        fit[j] = fit_affine(x + 32 * j, 32, L);
        max_scale = std::max(max_scale, fit[j].scale);
        max_offset = std::max(max_offset, fit[j].offset);
    }
    const float d = round_scale(max_scale / 63.0f);
    const float dmin = round_scale(max_offset / 63.0f);
    store_half(b, d);
    store_half(b + 2, dmin);
    int sc[8], m[8];
    for (int j = 0; j < 8; ++j) {
        sc[j] = d > 0 ? nearest(fit[j].scale / d, 0, 63) : 0;
        m[j] = dmin > 0 ? nearest(fit[j].offset / dmin, 0, 63) : 0;
    }
    pack_scales(sc, m, b + 4);
    for (int j = 0; j < 8; ++j) {
        // Exactly the decoder's values: w = d1 * q - m1.
        const float d1 = d * static_cast<float>(sc[j]), m1 = dmin * static_cast<float>(m[j]);
        for (int i = 0; i < 32; ++i)
            levels[32 * j + i] = d1 > 0 ? nearest((x[32 * j + i] + m1) / d1, 0, L) : 0;
    }
}

void block_q4_k(const float* x, uint8_t* b) {
    int q[256];
    k_affine(x, b, 15, q);
    uint8_t* qs = b + 16;
    for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 32; ++l)
            qs[32 * c + l] = static_cast<uint8_t>(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
}

void block_q5_k(const float* x, uint8_t* b) {
    int q[256];
    k_affine(x, b, 31, q);
    uint8_t* qh = b + 16;
    uint8_t* qs = b + 48;
    std::memset(qh, 0, 32);
    for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 32; ++l) {
            const int lo = q[64 * c + l], hi = q[64 * c + 32 + l];
            qs[32 * c + l] = static_cast<uint8_t>((lo & 0x0f) | ((hi & 0x0f) << 4));
            qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
        }
}

// A symmetric fit of 16 weights to levels -32..31: w ~ s * q. Tries scales that put the extreme weight at or
// near -32, refits s by least squares, keeps the smallest squared error. s may be negative.
float fit_symmetric(const float* x) {
    float amax = 0.0f, extreme = 0.0f;
    for (int i = 0; i < 16; ++i)
        if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), extreme = x[i];
    if (amax == 0.0f) return 0.0f;
    float best = extreme / -32.0f;
    float best_err = 0;
    for (int i = 0; i < 16; ++i) {
        const float e = best * static_cast<float>(nearest(x[i] / best, -32, 31)) - x[i];
        best_err += e * e;
    }
    for (int step = -6; step <= 6; ++step) {
        const float iscale = -(32.0f + 0.1f * static_cast<float>(step)) / extreme;
        float sxq = 0, sqq = 0;
        int q[16];
        for (int i = 0; i < 16; ++i) {
            q[i] = nearest(x[i] * iscale, -32, 31);
            sxq += x[i] * static_cast<float>(q[i]);
            sqq += static_cast<float>(q[i] * q[i]);
        }
        if (sqq <= 0) continue;
        const float s = sxq / sqq;
        float err = 0;
        for (int i = 0; i < 16; ++i) {
            const float e = s * static_cast<float>(q[i]) - x[i];
            err += e * e;
        }
        if (err < best_err) best_err = err, best = s;
    }
    return best;
}

void block_q6_k(const float* x, uint8_t* b) {
    float s[16];
    float smax = 0.0f, sext = 0.0f;
    for (int j = 0; j < 16; ++j) {
        s[j] = fit_symmetric(x + 16 * j);
        if (std::fabs(s[j]) > smax) smax = std::fabs(s[j]), sext = s[j];
    }
    // The sub-block scale of largest magnitude becomes -128 (int8's asymmetric end).
    const float d = round_scale(sext / -128.0f);
    store_half(b + 208, d);
    auto* sc = reinterpret_cast<int8_t*>(b + 192);
    int q[256];
    for (int j = 0; j < 16; ++j) {
        sc[j] = static_cast<int8_t>(d != 0.0f ? nearest(s[j] / d, -128, 127) : 0);
        const float d1 = d * static_cast<float>(sc[j]);
        for (int i = 0; i < 16; ++i) q[16 * j + i] = (d1 != 0.0f ? nearest(x[16 * j + i] / d1, -32, 31) : 0) + 32;
    }
    uint8_t* ql = b;
    uint8_t* qh = b + 128;
    for (int h = 0; h < 2; ++h)
        for (int l = 0; l < 32; ++l) {
            const int* e = q + 128 * h + l;
            const int q1 = e[0], q2 = e[32], q3 = e[64], q4 = e[96];
            ql[64 * h + l] = static_cast<uint8_t>((q1 & 0x0f) | ((q3 & 0x0f) << 4));
            ql[64 * h + l + 32] = static_cast<uint8_t>((q2 & 0x0f) | ((q4 & 0x0f) << 4));
            qh[32 * h + l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
        }
}

}  // namespace

void quantize(DType t, const float* src, void* dst, int64_t n) {
    if (!can_quantize(t))
        throw UnsupportedError("quant::quantize: cannot quantize to " + std::string(dtype_name(t)));
    const int64_t bs = dtype_block_size(t), bb = dtype_block_bytes(t);
    if (n < 0 || n % bs != 0)
        throw Error("quant::quantize: " + std::to_string(n) + " weights are not a whole number of " +
                    std::string(dtype_name(t)) + " blocks of " + std::to_string(bs));
    // Scales are f16: a weight of magnitude L * 65504 (L = the largest level) would need an infinite scale.
    const float limit = kMaxHalf * (t == DType::Q8_0 ? 127.0f : 8.0f);
    for (int64_t i = 0; i < n; ++i)
        if (!std::isfinite(src[i]) || std::fabs(src[i]) > limit)
            throw InputError("quant::quantize: weight " + std::to_string(i) + " = " + std::to_string(src[i]) +
                             " cannot be quantized to " + std::string(dtype_name(t)) +
                             (std::isfinite(src[i]) ? " (too large for its f16 scales)" : " (not finite)"));
    uint8_t* out = out_bytes(dst);
    for (int64_t i = 0; i < n; i += bs, out += bb) {
        const float* x = src + i;
        switch (t) {
            case DType::Q8_0: block_q8_0(x, out); break;
            case DType::Q4_0: block_q4_0(x, out); break;
            case DType::Q4_K: block_q4_k(x, out); break;
            case DType::Q5_K: block_q5_k(x, out); break;
            case DType::Q6_K: block_q6_k(x, out); break;
            default: break;
        }
    }
}

}  // namespace strata::quant
