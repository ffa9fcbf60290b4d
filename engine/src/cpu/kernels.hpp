#pragma once
// The inner loops of the CPU backend: widening stored weights (F32, F16, BF16, ggml blocks) to float32 and the
// dot products of matmul and attention. Block types are decoded a block at a time inside the dot products
// (strata/quant.hpp), never as a dequantized copy of a whole weight. Written with GCC vector extensions so that -O3 emits SIMD code on any target; on
// x86-64 each kernel is also cloned for x86-64-v3 (AVX2 + FMA) and picked at load time. Where an instruction set
// changes the kernel itself (F16 by F16C, kernels_f16c.cpp; the integer dot products, quant/dot_q8.cpp) the
// caller's CpuIsa picks it.
#include <cstdint>
#include <vector>

#include "strata/cpu_isa.hpp"
#include "strata/quant.hpp"
#include "strata/tensor.hpp"

namespace strata::cpu {

// Rows of a weight widened together by the prefill kernel (each widened once per matmul, reused for all T).
inline constexpr int64_t kRowBlock = 8;

// The stored types the kernels read.
bool supported(DType t);

// out[0..cols) = canonical row r of w as float32 (the HF rope permutation resolved by row_ptr).
void widen_row(const TensorView& w, int64_t r, float* out, CpuIsa isa);

// out[0..n) = the n binary16 values at h, widened exactly (a KV cache in binary16).
void widen_f16(const uint16_t* h, float* out, int64_t n, CpuIsa isa);

// The keys or the values in the KV cache: row j at f32 + j * stride (a float32 cache) or at f16 + j * stride
// (binary16, the other null). columns(at) is one kv head's part of the rows, from column at.
struct KvHead {
    const float* f32 = nullptr;
    const uint16_t* f16 = nullptr;
    int64_t stride = 0;
    KvHead columns(int64_t at) const { return {f32 ? f32 + at : nullptr, f16 ? f16 + at : nullptr, stride}; }
};

// A tile of queries that share one kv head (grouped-query attention): Qn consecutive tokens times G query heads.
// Query (i, g) is the D floats at q + i * q_tok + g * q_head, its output goes to out + the same offset and its
// probabilities to probs + i * p_tok + g * p_head, and it sees the first n0 + i keys (the causal mask). Every
// probabilities row has room for n0 + Qn - 1 floats; past a query's own keys the kernels may leave scores there.
struct QueryTile {
    const float* q = nullptr;
    float* out = nullptr;
    int64_t q_tok = 0, q_head = 0;
    float* probs = nullptr;  // the trace's attention, or scratch
    int64_t p_tok = 0, p_head = 0;
    int64_t Qn = 1, G = 1, D = 0, n0 = 1;
};

// Attention of a tile of queries: probs = softmax_j(q . k_j * scale) over its keys and out = sum_j probs_j v_j,
// each sum in the order of j. Keys and values are read a block of rows at a time (binary16 rows widened once into
// L1) and used by every query of the tile while there. A query's result is the same bits whatever tile it is in
// (a prompt's tokens together, or one decode step).
void attend_heads(const QueryTile& t, const KvHead& k, const KvHead& v, float scale, CpuIsa isa);

// Decode (matrix-vector): out[r] = w[r, :] . x for r in [r0, r1).                x: [cols]; out: [rows]
void matvec(const TensorView& w, const float* x, float* out, int64_t r0, int64_t r1, CpuIsa isa);

// The fast path's F16 decode (llama.cpp's too): x rounded to binary16 once per matmul, then read as halves like
// the weights, so half the bytes of x pass through L1 per weight. x is first scaled by a power of two,
// half_scale(max |x|) = 2^(14 - floor(log2 max |x|)), which puts its largest element in [16384, 32768): binary16
// then keeps 11 significant bits of every element within 2^-24 of the largest (no overflow, no subnormals where
// it matters), and the products are scaled back exactly. half_activations fills xh ([cols]) and returns the
// scale, or 0 where the path does not apply (the generic instruction set, or x holding Inf or NaN) and the
// caller takes the exact matvec.
float half_scale(float amax);
float half_activations(const float* x, int64_t n, std::vector<uint16_t>& xh, CpuIsa isa);
void matvec_f16_h(const TensorView& w, const uint16_t* xh, float scale, float* out, int64_t r0, int64_t r1,
                  CpuIsa isa);

// Prefill (matrix-matrix): out[t, r] = w[r, :] . x[t, :] for r in [r0, r1), t in [0, T).
// x: [T, cols]; out: [T, rows]; scratch: kRowBlock * cols floats owned by the calling thread.
void matmul_rows(const TensorView& w, const float* x, int64_t T, float* out, int64_t r0, int64_t r1,
                 float* scratch, CpuIsa isa);

// The integer-dot path (block types only): out[t, r] = w[r, :] . x'[t, :] for r in [r0, r1), t in [0, T), x' the
// T token rows quantized together into x (quant::quantize_activations over T * cols). Each weight row is read
// once and used for every token while it is in L1. group > 1: w's rows are stored in groups of that many
// (quant::interleave_rows; r0 and r1 multiples of it).                                   out: [T, rows]
void matmul_q8_rows(const TensorView& w, const quant::Q8Activations& x, int64_t T, float* out, int64_t r0,
                    int64_t r1, CpuIsa isa, int group = 1);

// The prefill tile for CPUs with AVX-512 (kernels_avx512.cpp): out[t, r_base + j] = wblock[j, :] . x[t, :].
namespace avx512 {
void tiles(const float* wblock, int64_t nrows, const float* x, int64_t T, int64_t n, float* out, int64_t out_stride,
           int64_t r_base);
// Decode with F16 / BF16 weights on 16-wide vectors, one row at a time (a sequential stream per thread); BF16
// prefetches `ahead` bytes ahead of the weights read where > 0.
void matvec_f16(const TensorView& w, const float* x, float* out, int64_t r0, int64_t r1);
void matvec_bf16(const TensorView& w, const float* x, float* out, int64_t r0, int64_t r1, int ahead);
// The fast path's F16 decode (half_activations, matvec_f16_h): x times half_scale(max |x|) in binary16, and
// each sum times `unscale`, its inverse; `ahead` > 0 prefetches that many bytes ahead of the weights read.
// to_f16 returns the scale, 0 where x holds Inf or NaN.
float to_f16(const float* x, uint16_t* h, int64_t n);
void matvec_f16_h(const TensorView& w, const uint16_t* xh, float unscale, float* out, int64_t r0, int64_t r1,
                  int ahead);
// Attention's two products for a block of nb key or value rows (D floats each, rs apart, D a multiple of 16), with
// the generic kernels' sums (attend_heads; the same bits where the compiler fuses their multiply-adds, as at -O2
// and up), on 16-wide vectors: two queries' 8-lane partial sums side by side against each key, and four queries'
// weighted sums of each value row. Scores: s[m][jj] for every
// query m < M and jj < nb. Values: out[m][c] += sum of p[m][jj] rows[jj][c] over jj < nk[m], in the order of jj.
void attention_scores(const float* const* q, int64_t M, const float* rows, int64_t rs, int64_t nb, int64_t D,
                      float scale, float* const* s);
void attention_values(float* const* out, const float* const* p, const int64_t* nk, int64_t M, const float* rows,
                      int64_t rs, int64_t D);
}  // namespace avx512

// The F16C kernels (kernels_f16c.cpp), for CPUs with AVX2 + FMA + F16C.
namespace f16c {
void widen(const std::byte* p, float* out, int64_t n);
void matvec(const TensorView& w, const float* x, float* out, int64_t r0, int64_t r1);
float to_f16(const float* x, uint16_t* h, int64_t n);  // as avx512::to_f16 / matvec_f16_h
void matvec_h(const TensorView& w, const uint16_t* xh, float unscale, float* out, int64_t r0, int64_t r1);
// BF16 weights on 8-wide vectors (AVX2): widened exactly (the bits moved into the high half), as avx512's.
void widen_bf16(const std::byte* p, float* out, int64_t n);
void matvec_bf16(const TensorView& w, const float* x, float* out, int64_t r0, int64_t r1);
}  // namespace f16c

}  // namespace strata::cpu
