#pragma once
// A loaded checkpoint: config, tokenizer and canonical weight views over memory-mapped files.
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "strata/config.hpp"
#include "strata/mapped_file.hpp"
#include "strata/tensor.hpp"
#include "strata/tokenizer.hpp"

namespace strata {

enum class CheckpointFormat { HuggingFace, Meta, GGUF };
std::string_view format_name(CheckpointFormat f);  // "huggingface", "meta", "gguf"

struct LoadProgress {
    // Called with (bytes done, bytes total, tensors done, tensors total); may be empty.
    std::function<void(uint64_t, uint64_t, int64_t, int64_t)> on_progress;
    // Polled between steps; when it becomes true the load throws Cancelled.
    const std::atomic<bool>* cancel = nullptr;
};

class Model {
public:
    ModelConfig config;
    CheckpointFormat format = CheckpointFormat::HuggingFace;
    std::filesystem::path path;                // the folder or .gguf file it came from
    std::vector<MappedFile> files;             // every mapped file; tensors point into these
    std::map<std::string, TensorView> tensors; // by canonical name
    Tokenizer tokenizer;
    // GGUF's rope_freqs.weight (Llama 3.1 scaling factors per frequency) when the file has one.
    std::vector<float> rope_freqs_factors;

    // The canonical tensor or a ModelError naming it and the file.
    const TensorView& tensor(const std::string& name) const;
    bool has(const std::string& name) const { return tensors.count(name) != 0; }
    // `output`, or `tok_embeddings` for tied models.
    const TensorView& output_weight() const;

    // Exact parameter counts: total, and per group ("tok_embeddings", "attention", "feed_forward", "norms", "output").
    uint64_t parameter_count() const;
    std::map<std::string, uint64_t> parameter_groups() const;
    uint64_t file_bytes() const;

    // Checks every canonical tensor exists with the shape the config implies (ModelError otherwise).
    void validate_shapes() const;
};

// Detects the format of `path` (HF folder, Meta folder, .gguf file) and loads it. Throws FormatError /
// ModelError / TokenizerError / UnsupportedError with the file and what is wrong; Cancelled when cancelled.
std::unique_ptr<Model> load_model(const std::filesystem::path& path, const LoadProgress& progress = {});

// The format-specific loaders (each in its own source file).
std::unique_ptr<Model> load_huggingface(const std::filesystem::path& dir, const LoadProgress& progress);
std::unique_ptr<Model> load_meta(const std::filesystem::path& dir, const LoadProgress& progress);
std::unique_ptr<Model> load_gguf(const std::filesystem::path& file, const LoadProgress& progress);

// Canonical names, in model.py's vocabulary.
namespace names {
std::string layer(int64_t i, const char* suffix);  // layer(3, "attention.wq") -> "layers.3.attention.wq"
}

}  // namespace strata
