#pragma once
// The built-in demonstration model: Llama 3 architecture, the real Llama 3 tokenizer (vocab 128256), a few
// small layers, written in Hugging Face layout and marked as a demonstration. By default it is the tiny Llama 3
// that scripts/train-demo trained (its compact weights are embedded in the engine, see docs/demo-model.md);
// with `random` it is today's random-weights model from a fixed seed, for tests that want no structure.
#include <cstdint>
#include <filesystem>

#include "strata/config.hpp"

namespace strata {

struct DemoOptions {
    bool random = false;  // random weights instead of the trained model; the fields below apply only then
    uint64_t seed = 20240418;
    int64_t dim = 256;
    int64_t n_layers = 4;
    int64_t n_heads = 8;
    int64_t n_kv_heads = 2;
    int64_t hidden_dim = 768;
};

// Writes config.json (with "strata_demo": true, and "strata_demo_trained" and "strata_demo_description"),
// generation_config.json, model.safetensors (bf16), README.txt and a copy of tokenizer.json into out_dir; the same
// bytes every time. Throws Error when the folder cannot be written or the tokenizer is missing, FormatError when the
// embedded weights are damaged.
void make_demo_model(const std::filesystem::path& out_dir, const std::filesystem::path& tokenizer_json,
                     const DemoOptions& options = {});

// True when out_dir holds the demonstration model that make_demo_model would write now (the trained one, from the
// weights embedded in this build), so a folder cached by an older Strata (random weights) is rewritten.
bool demo_model_is_current(const std::filesystem::path& out_dir);

}  // namespace strata
