#pragma once
// A weight tensor: a typed view into a memory-mapped checkpoint, under its canonical (Meta) name.
#include <cstdint>
#include <string>
#include <vector>

#include "strata/dtype.hpp"

namespace strata {

struct TensorView {
    std::string name;            // canonical: "tok_embeddings", "layers.0.attention.wq", "norm", "output"
    std::string source_name;     // the name in the file: "model.layers.0.self_attn.q_proj.weight", "blk.0.attn_q.weight"
    DType dtype = DType::F32;
    std::vector<int64_t> shape;  // torch order: [out_features, in_features] for matrices, [n] for vectors
    const std::byte* data = nullptr;  // the tensor's bytes inside the mapped file
    uint64_t nbytes = 0;
    std::string file;            // path of the file holding the bytes (for error messages)
    uint64_t file_offset = 0;    // offset of `data` inside that file

    // Hugging Face stores wq/wk with rows permuted for rotate-half RoPE. When rope_heads > 0 the canonical
    // (Meta, interleaved pairs) row r lives at physical row physical_row(r); the permutation is undone by
    // every reader of rows (the CPU backend per row, the Vulkan upload while staging), never by copying.
    int32_t rope_heads = 0;

    int64_t numel() const;
    int64_t rows() const { return shape.empty() ? 0 : shape[0]; }                         // 1 for vectors
    int64_t cols() const { return shape.size() < 2 ? (shape.empty() ? 0 : shape[0]) : shape[1]; }
    uint64_t row_bytes() const { return dtype_bytes(dtype, cols()); }
    int64_t physical_row(int64_t r) const;
    const std::byte* row_ptr(int64_t r) const { return data + physical_row(r) * row_bytes(); }
    // Canonical row r widened to float32 into out[0..cols) (F32/F16/BF16, and ggml block types dequantized).
    void row_to_f32(int64_t r, float* out) const;
    // The whole tensor in canonical layout as float32 (tests and small tensors only: this copies).
    std::vector<float> to_f32() const;
};

}  // namespace strata
