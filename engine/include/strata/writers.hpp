#pragma once
// Writing a loaded model in the other checkpoint formats. Writers read canonical rows (TensorView::row_ptr undoes
// Hugging Face's q/k permutation), so every output is in Meta's interleaved layout, and tensors keep their stored
// type (F32/F16/BF16 or ggml blocks): the bytes of each canonical row are copied unchanged.
#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "strata/config.hpp"
#include "strata/model.hpp"
#include "strata/tokenizer.hpp"

namespace strata {

// A GGUF v3 file with llama.cpp's "llama" metadata and tensor names, the tokenizer (tokens, token types, merges,
// bos/eos) so that other GGUF tools can run it, and rope_freqs.weight for Llama 3.1 scaling. Throws Error when
// the file cannot be written, UnsupportedError for a tensor type GGUF lacks.
void write_gguf(const Model& model, const std::filesystem::path& out);

// How write_gguf stores each tensor when it is not a plain copy.
struct GgufWriteOptions {
    // The type each canonical tensor is written as; tensors not listed keep their stored type. A tensor whose
    // type changes is converted while it is written, a batch of rows at a time (widened to float32, then rounded
    // to F16/BF16 or quantized), so memory never holds a whole converted weight.
    std::map<std::string, DType> types;
    std::optional<uint32_t> file_type;  // general.file_type; default: gguf_file_type(tok_embeddings' type)
    int threads = 0;                    // conversion threads (0 = hardware concurrency)
    // Called before each tensor is written: (canonical name, type written, tensors done, tensors total).
    std::function<void(const std::string&, DType, int64_t, int64_t)> on_tensor;
    // Checked between batches of rows: when it becomes true, writing stops with Cancelled and the temporary file
    // is removed (strata-cli's Ctrl-C).
    const std::atomic<bool>* cancel = nullptr;
};
// As above; the file appears under `out` only when complete: it is written to a temporary name in the same
// folder and renamed, and the temporary is removed when anything fails.
void write_gguf(const Model& model, const std::filesystem::path& out, const GgufWriteOptions& options);

// general.file_type (llama.cpp's llama_ftype numbering) of a file whose weights are mostly `t`: F32 0, F16 1,
// Q4_0 2, Q8_0 7, Q4_K 14 (Q4_K_S), Q5_K 16 (Q5_K_S), Q6_K 18, BF16 32.
uint32_t gguf_file_type(DType t);

// A Meta folder: params.json, consolidated.00.pth (torch.save's zip layout with a protocol-2 pickle of a dict of
// tensors) and tokenizer.model (tiktoken ranks). Creates out_dir if needed.
void write_meta(const Model& model, const std::filesystem::path& out_dir);

// The canonical names of a model's weights in llama.cpp's GGUF order: tok_embeddings, each layer's attention_norm,
// wq, wk, wv, wo, ffn_norm, w1, w2, w3, then norm, and output unless it is tied to tok_embeddings.
std::vector<std::string> gguf_weight_order(const ModelConfig& config);

// The per-pair factors Llama 3.1's apply_scaling divides the RoPE frequencies by, as llama.cpp's converter stores
// them in rope_freqs.weight: head_dim / 2 floats (1 for high frequencies, `factor` for low ones, smooth between).
std::vector<float> llama31_rope_factors(const ModelConfig& config);

// The byte-pair merges a rank table implies, as tokenizer.json and GGUF list them: every split (left, right) of
// every multi-byte token into two tokens, ordered by the merged token's rank, then by the parts' ranks. BPE with
// these merges chooses the same pair at every step as tiktoken does with the ranks. Returned as raw bytes.
std::vector<std::pair<std::string, std::string>> bpe_merges(const Tokenizer& tokenizer);

}  // namespace strata
