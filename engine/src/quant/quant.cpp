// Dequantization, dot products and validation of ggml's block types (strata/quant.hpp). Quantizers are in
// quantize.cpp.
#include "strata/quant.hpp"

#include <cmath>
#include <cstring>
#include <string>

#include "quant/blocks.hpp"
#include "quant/dot.hpp"
#include "strata/error.hpp"

namespace strata::quant {

namespace {

const uint8_t* bytes(const void* p) { return static_cast<const uint8_t*>(p); }

void check_count(DType t, int64_t n, const char* fn) {
    const int64_t bs = dtype_block_size(t);
    if (n < 0 || n % bs != 0)
        throw Error(std::string("quant::") + fn + ": " + std::to_string(n) + " weights of " +
                    std::string(dtype_name(t)) + " are not a whole number of " + std::to_string(bs) +
                    "-weight blocks");
}

// Decodes `count` weights (a multiple of the block size, at most 256) starting at block pointer p.
inline void decode(DType t, const uint8_t* p, float* y, int64_t count) {
    switch (t) {
        case DType::Q8_0:
            for (int64_t i = 0; i < count; i += 32, p += 34) blocks::decode_q8_0(p, y + i);
            return;
        case DType::Q4_0:
            for (int64_t i = 0; i < count; i += 32, p += 18) blocks::decode_q4_0(p, y + i);
            return;
        case DType::Q4_K: blocks::decode_q4_k(p, y); return;
        case DType::Q5_K: blocks::decode_q5_k(p, y); return;
        case DType::Q6_K: blocks::decode_q6_k(p, y); return;
        default: return;
    }
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define STRATA_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define STRATA_SIMD_CLONES
#endif

// Whole blocks decoded one after another (the prefill path widens a row at a time through this). Cloned for
// x86-64-v3 so the decoders' loops vectorise. Every weight is bit-identical in both clones: the only expression a
// compiler may fuse, (d*sc) * q - dmin*m of the K types, has an exact product (at most 11 + 6 + 5 significant
// bits), so a fused multiply-add rounds once, exactly as the separate subtraction does.
STRATA_SIMD_CLONES void decode_blocks(DType t, const uint8_t* p, float* dst, int64_t n) {
    const int64_t bs = dtype_block_size(t), bb = dtype_block_bytes(t);
    for (int64_t i = 0; i < n; i += bs, p += bb) decode(t, p, dst + i, bs);
}

// Weights widened together by the non-block fallback of dot().
constexpr int64_t kChunk = 256;

std::string hex16(uint16_t v) {
    static const char* digits = "0123456789abcdef";
    std::string s = "0x";
    for (int sh = 12; sh >= 0; sh -= 4) s += digits[(v >> sh) & 15];
    return s;
}

}  // namespace

void dequantize(DType t, const void* src, float* dst, int64_t n) {
    check_count(t, n, "dequantize");
    const uint8_t* p = bytes(src);
    switch (t) {
        case DType::F32: std::memcpy(dst, p, static_cast<size_t>(n) * 4); return;
        case DType::F16:
            for (int64_t i = 0; i < n; ++i) dst[i] = blocks::half(p + 2 * i);
            return;
        case DType::BF16:
            for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(blocks::load_u16(p + 2 * i));
            return;
        default: break;
    }
    decode_blocks(t, p, dst, n);
}

float dot(DType t, const void* row, const float* x, int64_t n, CpuIsa isa) {
    check_count(t, n, "dot");
    if (!dtype_is_block(t)) {
        // Not the fast path (the CPU kernels widen F32/F16/BF16 themselves); here for completeness.
        float w[kChunk];
        float s = 0.0f;
        const auto* p = bytes(row);
        const int64_t eb = dtype_block_bytes(t);
        for (int64_t i = 0; i < n; i += kChunk) {
            const int64_t c = n - i < kChunk ? n - i : kChunk;
            dequantize(t, p + i * eb, w, c);
            for (int64_t j = 0; j < c; ++j) s += w[j] * x[i + j];
        }
        return s;
    }
    return detail::dot_blocks(t, bytes(row), x, n, isa);
}

void validate(DType t, const void* src, int64_t n, std::string_view what) {
    if (!dtype_is_block(t)) return;
    check_count(t, n, "validate");
    const int64_t bs = dtype_block_size(t), bb = dtype_block_bytes(t);
    // Where the f16 scales sit in a block, and their names for the message.
    int offsets[2] = {0, -1};
    const char* labels[2] = {"d", "dmin"};
    switch (t) {
        case DType::Q4_K:
        case DType::Q5_K: offsets[1] = 2; break;
        case DType::Q6_K: offsets[0] = 208; break;
        default: break;
    }
    const uint8_t* p = bytes(src);
    const int64_t nblocks = n / bs;
    for (int64_t b = 0; b < nblocks; ++b, p += bb) {
        for (int k = 0; k < 2; ++k) {
            if (offsets[k] < 0) continue;
            const uint16_t h = blocks::load_u16(p + offsets[k]);
            if ((h & 0x7c00u) != 0x7c00u) continue;
            throw FormatError(std::string(what) + ": malformed " + std::string(dtype_name(t)) + " block " +
                              std::to_string(b) + " (weights " + std::to_string(b * bs) + ".." +
                              std::to_string(b * bs + bs - 1) + "): scale " + labels[k] + " = " + hex16(h) + " is " +
                              ((h & 0x3ffu) ? "NaN" : "infinite") + " (f16 scales must be finite)");
        }
    }
}

bool can_quantize(DType t) {
    return t == DType::Q8_0 || t == DType::Q4_0 || t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K;
}

double bits_per_weight(DType t) {
    return 8.0 * static_cast<double>(dtype_block_bytes(t)) / static_cast<double>(dtype_block_size(t));
}

}  // namespace strata::quant
