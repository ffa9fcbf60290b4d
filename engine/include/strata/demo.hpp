#pragma once
// The built-in demonstration model: Llama 3 architecture, the real Llama 3 tokenizer (vocab 128256), a few
// small layers, random weights from a fixed seed, written in Hugging Face layout and marked as a demonstration.
#include <cstdint>
#include <filesystem>

#include "strata/config.hpp"

namespace strata {

struct DemoOptions {
    uint64_t seed = 20240418;
    int64_t dim = 256;
    int64_t n_layers = 4;
    int64_t n_heads = 8;
    int64_t n_kv_heads = 2;
    int64_t hidden_dim = 768;
};

// Writes config.json (with "strata_demo": true), generation_config.json, model.safetensors (bf16) and a copy of
// tokenizer.json into out_dir. Throws Error when the folder cannot be written or the tokenizer is missing.
void make_demo_model(const std::filesystem::path& out_dir, const std::filesystem::path& tokenizer_json,
                     const DemoOptions& options = {});

}  // namespace strata
