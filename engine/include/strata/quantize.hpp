#pragma once
// Quantizing a whole model into a GGUF file: which type each tensor gets (the scheme and its rules), then the
// streaming write (write_gguf with GgufWriteOptions::types).
//
// Schemes:
//   Q8_0, Q4_0, Q4_K, Q5_K, Q6_K   every matrix in that type ("pure": llama.cpp's --pure)
//   F16, BF16                      every matrix rounded to binary16 / bfloat16 (not quantized: the same weights as
//                                  a GGUF that llama.cpp's converter writes with --outtype f16 / bf16, so one set of
//                                  bytes can be compared across formats and programs)
//   Q4_K_M, Q5_K_M                 llama.cpp's mixes (llama_tensor_get_type in llama-quant.cpp):
//       output (or tok_embeddings when the output is tied to it)   Q6_K
//       attention.wv of layer i     Q6_K when use_more_bits(i, n_layers), else the base type
//       feed_forward.w2 of layer i  Q6_K when use_more_bits(i, n_layers), else the base type
//       attention.wv, 70B models (80 layers)   at least Q5_K
//       everything else             the base type (Q4_K or Q5_K)
//     with use_more_bits(i, n) = i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2: the first and last eighth of the
//     layers and every third one between.
// Always: 1-D tensors (the RMSNorm gains) stay F32; rope_freqs stays F32.
// Fallbacks for rows that are not whole blocks (ne[0], the row length, must be a multiple of the block size):
//   a K type (256) on a row % 256 != 0  ->  Q8_0 (llama.cpp uses Q5_0/Q5_1 for Q4_K/Q5_K, which Strata does not
//                                           read; Q8_0 is its own choice for Q6_K)
//   Q8_0 / Q4_0 (32) on a row % 32 != 0 ->  F16
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "strata/dtype.hpp"
#include "strata/model.hpp"

namespace strata {

struct QuantScheme {
    std::string name;         // "Q4_K_M"
    DType base = DType::Q8_0; // the type of most matrices
    bool mix = false;         // llama.cpp's _M rules
    uint32_t file_type = 7;   // general.file_type (llama_ftype)
};

// "Q8_0", "Q4_0", "Q4_K", "Q5_K", "Q6_K", "Q4_K_M", "Q5_K_M", "F16", "BF16" (case-insensitive). InputError for anything else,
// listing the valid names.
QuantScheme quant_scheme(std::string_view name);
std::vector<std::string> quant_scheme_names();

struct TensorPlan {
    std::string name;    // canonical
    DType from;          // stored type
    DType to;            // type written
    std::string reason;  // "base type", "mix: output", "fallback: row 448 % 256 != 0", "1-D: kept F32"
};

// The type of every tensor of `model` under `scheme`, in write order (tok_embeddings, layers, norm, output).
std::vector<TensorPlan> quant_plan(const Model& model, const QuantScheme& scheme);

// Writes `model` quantized by `plan` to `out` (write_gguf: streaming, temporary file renamed at the end).
// on_tensor as in GgufWriteOptions.
void write_quantized_gguf(const Model& model, const std::filesystem::path& out, const QuantScheme& scheme,
                          const std::vector<TensorPlan>& plan, int threads = 0,
                          std::function<void(const std::string&, DType, int64_t, int64_t)> on_tensor = {},
                          const std::atomic<bool>* cancel = nullptr);

}  // namespace strata
