#pragma once
// ggml's quantized block types (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K), as the GGUF files of llama.cpp store them.
//
// Block layouts (ggml-common.h; all multi-byte fields little-endian, f16 = IEEE binary16):
//   Q8_0  32 weights,  34 bytes: d:f16, qs:int8[32]                 w[i] = d * qs[i]
//   Q4_0  32 weights,  18 bytes: d:f16, qs:u8[16]                   w[j] = d * ((qs[j] & 15) - 8),
//                                                                    w[j+16] = d * ((qs[j] >> 4) - 8)
//   Q4_K 256 weights, 144 bytes: d:f16, dmin:f16, scales:u8[12], qs:u8[128]
//        8 sub-blocks of 32 with 6-bit scale sc and 6-bit min m each (packed in `scales`);
//        w = (d*sc) * q - (dmin*m), q in [0, 15]; chunk c of 64 weights uses qs[32c..32c+32): low nibbles are
//        sub-block 2c, high nibbles sub-block 2c+1
//   Q5_K 256 weights, 176 bytes: d:f16, dmin:f16, scales:u8[12], qh:u8[32], qs:u8[128]
//        as Q4_K with q in [0, 31]; bit 2c of qh[l] is the fifth bit of the low nibble of chunk c, bit 2c+1 of the
//        high nibble
//   Q6_K 256 weights, 210 bytes: ql:u8[128], qh:u8[64], scales:int8[16], d:f16
//        16 sub-blocks of 16, w = (d*sc) * (q - 32), q in [0, 63] (4 low bits in ql, 2 high bits in qh)
//
// Arithmetic: every weight is computed in float32 in the order written above (as ggml's reference dequantizer
// does), so dequantize() is exact and deterministic: a decoder written from this table gives the same bits.
// f16 scales are widened exactly, subnormals included.
//
// Malformed blocks: a block is malformed when one of its f16 scales (d, and dmin for the K types) is NaN or
// infinite; every other bit pattern is a valid block (negative d included: ggml's Q8_0/Q4_0 quantizers write
// them). validate() throws FormatError for malformed blocks; dequantize() and dot() do not check (they would
// produce NaN/Inf), so weights from a file are validated once when a backend loads them.
//
// Thread safety: every function here is pure (no shared state).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "strata/cpu_isa.hpp"
#include "strata/dtype.hpp"
#include "strata/host_memory.hpp"

namespace strata::quant {

// n must be a multiple of dtype_block_size(t); src holds dtype_bytes(t, n) bytes. For F32/F16/BF16 these widen.
void dequantize(DType t, const void* src, float* dst, int64_t n);

// sum_i w[i] * x[i] over the n weights of `row` (stored as t), float32 accumulation (partial sums per lane).
// Equal, to float32 rounding, to dot(dequantize(row), x). `isa` picks the kernels (the CPU must support it).
float dot(DType t, const void* row, const float* x, int64_t n, CpuIsa isa = best_cpu_isa());

// Quantizes n floats (a multiple of the block size) into dtype_bytes(t, n) bytes at dst, for Q8_0, Q4_0, Q4_K,
// Q5_K and Q6_K. Throws InputError for a non-finite input or one too large for the type's f16 scales
// (|x| beyond ~65504 * 127), UnsupportedError for other types.
void quantize(DType t, const float* src, void* dst, int64_t n);

// Throws FormatError naming `what`, the block index and the bad scale when a block of the n weights at src is
// malformed (see above). A no-op for F32/F16/BF16.
void validate(DType t, const void* src, int64_t n, std::string_view what);

// True for the types quantize() produces.
bool can_quantize(DType t);

// Bits per weight of a stored type: 32, 16, 8.5 (Q8_0), 4.5 (Q4_0, Q4_K), 5.5 (Q5_K), 6.5625 (Q6_K).
double bits_per_weight(DType t);

// ---- The integer-dot path (the CPU backend's fast path for block types; not exact) ----
//
// The activation vector is quantized once per matrix product to 8 bits per element, in blocks of 32 with a float32
// scale each: x[32k + i] ~ d[k] * q[32k + i], d[k] = max |x| / 127 over the block, q = round(x / d) in
// [-127, 127]. A weight row's dot product is then a sum of exact integer dot products of its levels with q, one
// per 32 weights (per 16 for Q6_K's scales), each scaled in float32 by the weight block's scale times d[k]; the
// Q4_K/Q5_K mins use the sums of the quantized x per 32.
// The result equals sum_i w[i] * x'[i] with x' the dequantized activations, up to float32 rounding of the scale
// products; what it adds over the exact path is x's rounding (relative RMS ~0.3% per block, measured in
// docs/performance.md).
struct Q8Activations {
    int64_t n = 0;
    CacheLineVector<int8_t> q;      // [n]
    CacheLineVector<float> d;       // [n / 32]
    CacheLineVector<float> sum32;   // [n / 32]: d * sum of q over each 32 elements
    CacheLineVector<float> d8;      // [n / 32 * 8]: d with each scale in 8 consecutive lanes (the 512-bit kernels
                                    // read two blocks' scales, one per half of a vector, with one load)
    CacheLineVector<int16_t> pair32;  // [n / 2]: 32 * (q[2i] + q[2i + 1]), the offset of Q6_K's levels (q - 32)
                                      // (and, / 4, of Q4_0's, q - 8) in the 256-bit decode kernels' pair sums
    CacheLineVector<uint8_t> qu;      // [n]: q + 128 as unsigned bytes (q with its sign bit flipped), what the
                                      // 256-bit Q6_K kernel multiplies the signed levels of a prefill by, and the
                                      // 512-bit Q8_0 and Q4_0 kernels every token's
    CacheLineVector<int8_t> qk;  // [n]: q with the middle quarters of each 64 swapped (elements 0-15, 32-47, 16-31,
                                 // 48-63), so that a 256-bit Q4_K / Q5_K kernel's 16-byte halves pair two blocks
    CacheLineVector<int8_t> qv;  // [n]: q with the quarters of 16 of each 128 in the order 0, 4, 2, 6, 1, 5, 3, 7,
                                 // the order of the 512-bit Q4_K / Q5_K kernels' interleaved sub-blocks
    CacheLineVector<float> dk;   // [n / 32]: d with each 8 in the order 0, 2, 4, 6, 1, 3, 5, 7 (a last part of 8
                                 // as it is), the 256-bit Q4_K / Q5_K kernels' order of a super-block's scales
};

// Quantizes x[0..n) (n a multiple of 32) into `out`, reusing its storage. Non-finite x gives non-finite d.
// Every instruction set gives the same values (any but Generic: an AVX2 loop); the CPU must support `isa`.
void quantize_activations(const float* x, int64_t n, Q8Activations& out, CpuIsa isa = best_cpu_isa());

// sum_i w[i] * x'[i] for the n weights of `row` (Q8_0, Q4_0, Q4_K, Q5_K or Q6_K) against x' = x[first, first + n)
// (first a multiple of the type's block size, 32 or 256: several token rows quantized together; the K kernels
// read Q8Activations::qk and qv, whose orders hold within each 64 and 128 from the start), with the kernels of `isa`
// (which the CPU must support). The integer sums are exact for every isa; only float32 rounding differs between
// them. Anything else throws.
float dot_q8(DType t, const void* row, const Q8Activations& x, int64_t first, int64_t n, CpuIsa isa);

// out[tok * out_stride + r] = dot_q8(t, row r, x, tok * n, n, isa) for rows [r0, r1) of a matrix of n-weight rows
// stored back to back from base (group 1) or in groups of `group` rows (interleave_rows; r0 and r1 multiples of
// it), and the T token rows of x (x.n >= T * n): the same values, bit for bit, with each block of a row decoded
// once for up to four tokens (prefill) and, in decode, the weights prefetched ahead of the reads
// (cpu_prefetch_rows). The CPU backend's matmul calls it once per range of rows.
void dot_q8_matrix(DType t, const void* base, int64_t r0, int64_t r1, const Q8Activations& x, int64_t T, int64_t n,
                   CpuIsa isa, float* out, int64_t out_stride, int group = 1);

// Rows stored in groups, block by block: block k of row i of a group at (k * group + i) block bytes from the
// group's start, which is where the group's rows would start stored one after another. The x86 decode kernels
// of Q4_K, Q5_K and Q6_K read a group of kGroupRows as one stream and take each super-block's activations once
// from memory for all its rows (docs/performance.md); every other kernel reads such rows copied back.
inline constexpr int kGroupRows = 4;
// The group dot_q8_matrix's decode (one token) reads fastest for rows of n weights of type t with the kernels of
// isa: kGroupRows for the x86 K-type kernels' rows of more than 10240 weights, whose activations one row at a
// time no longer find in L1 (ffn_down's; narrower rows read 0.94-0.99x as fast in groups), else 1: rows one by one.
int decode_group(DType t, int64_t n, CpuIsa isa);
// The `rows` rows (a multiple of group) of n weights of type t at src, stored in groups of `group` at dst.
void interleave_rows(DType t, const void* src, int64_t rows, int64_t n, int group, void* dst);
// Row i of the group of `group` rows of n weights at src, copied back to its n weights' bytes at dst.
void deinterleave_row(DType t, const void* src, int group, int i, int64_t n, void* dst);

// The types dot_q8 reads.
bool has_integer_dot(DType t);

}  // namespace strata::quant
