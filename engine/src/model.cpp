// Model's accessors and checks, format detection, and the canonical names.
#include "strata/model.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <optional>
#include <set>
#include <system_error>

#include "strata/error.hpp"

namespace fs = std::filesystem;

namespace strata {

std::string_view format_name(CheckpointFormat f) {
    switch (f) {
        case CheckpointFormat::HuggingFace: return "huggingface";
        case CheckpointFormat::Meta: return "meta";
        case CheckpointFormat::GGUF: return "gguf";
    }
    return "?";
}

namespace names {
std::string layer(int64_t i, const char* suffix) { return "layers." + std::to_string(i) + "." + suffix; }
}  // namespace names

namespace {

std::string shape_str(const std::vector<int64_t>& s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
}

// The group a canonical tensor's parameters are counted in (parameter_groups).
const char* group_of(const std::string& name) {
    if (name == "tok_embeddings") return "tok_embeddings";
    if (name == "output") return "output";
    if (name == "norm" || name.ends_with(".attention_norm") || name.ends_with(".ffn_norm")) return "norms";
    if (name.find(".attention.") != std::string::npos) return "attention";
    if (name.find(".feed_forward.") != std::string::npos) return "feed_forward";
    return "other";
}

// Every canonical tensor the config implies, with its shape (model.py's Transformer.__init__).
std::vector<std::pair<std::string, std::vector<int64_t>>> expected_tensors(const ModelConfig& c) {
    std::vector<std::pair<std::string, std::vector<int64_t>>> t;
    t.push_back({"tok_embeddings", {c.vocab_size, c.dim}});
    for (int64_t i = 0; i < c.n_layers; ++i) {
        t.push_back({names::layer(i, "attention.wq"), {c.q_dim(), c.dim}});
        t.push_back({names::layer(i, "attention.wk"), {c.kv_dim(), c.dim}});
        t.push_back({names::layer(i, "attention.wv"), {c.kv_dim(), c.dim}});
        t.push_back({names::layer(i, "attention.wo"), {c.dim, c.q_dim()}});
        t.push_back({names::layer(i, "feed_forward.w1"), {c.hidden_dim, c.dim}});
        t.push_back({names::layer(i, "feed_forward.w2"), {c.dim, c.hidden_dim}});
        t.push_back({names::layer(i, "feed_forward.w3"), {c.hidden_dim, c.dim}});
        t.push_back({names::layer(i, "attention_norm"), {c.dim}});
        t.push_back({names::layer(i, "ffn_norm"), {c.dim}});
    }
    t.push_back({"norm", {c.dim}});
    if (!c.tie_embeddings) t.push_back({"output", {c.vocab_size, c.dim}});
    return t;
}

}  // namespace

const TensorView& Model::tensor(const std::string& name) const {
    auto it = tensors.find(name);
    if (it == tensors.end())
        throw ModelError(path.string() + ": no tensor " + name + " in this " + std::string(format_name(format)) +
                         " checkpoint");
    return it->second;
}

const TensorView& Model::output_weight() const {
    return config.tie_embeddings ? tensor("tok_embeddings") : tensor("output");
}

uint64_t Model::parameter_count() const {
    uint64_t n = 0;
    for (const auto& [name, t] : tensors) n += static_cast<uint64_t>(t.numel());
    // A tied model has no `output` tensor, so tok_embeddings is counted once, as in model.parameters().
    return n;
}

std::map<std::string, uint64_t> Model::parameter_groups() const {
    std::map<std::string, uint64_t> g{{"tok_embeddings", 0}, {"attention", 0}, {"feed_forward", 0}, {"norms", 0},
                                      {"output", 0}};
    for (const auto& [name, t] : tensors) g[group_of(name)] += static_cast<uint64_t>(t.numel());
    return g;
}

uint64_t Model::file_bytes() const {
    uint64_t n = 0;
    for (const MappedFile& f : files) n += f.size();
    return n;
}

void Model::validate_shapes() const {
    config.validate();
    const auto expected = expected_tensors(config);
    std::set<std::string> wanted;
    for (const auto& [name, shape] : expected) {
        wanted.insert(name);
        auto it = tensors.find(name);
        if (it == tensors.end())
            throw ModelError(path.string() + ": missing tensor " + name +
                             (name == "output" ? std::string(" (the config says the embeddings are not tied)")
                                               : std::string()));
        const TensorView& t = it->second;
        const std::string where = t.file.empty() ? path.string() : t.file;
        const std::string label = name + (t.source_name.empty() || t.source_name == name ? std::string()
                                                                                       : " (" + t.source_name + ")");
        if (t.shape != shape)
            throw ModelError(label + ": expected " + shape_str(shape) + ", found " + shape_str(t.shape) + " in " + where);
        if (t.nbytes != dtype_bytes(t.dtype, t.numel()))
            throw ModelError(label + ": " + std::to_string(t.nbytes) + " bytes do not hold " +
                             std::string(dtype_name(t.dtype)) + " " + shape_str(t.shape) + " in " + where);
        if (t.data == nullptr && t.nbytes != 0) throw ModelError(label + ": no data in " + where);
        if (t.rope_heads > 0 && (t.rows() % t.rope_heads != 0 || (t.rows() / t.rope_heads) % 2 != 0))
            throw ModelError(label + ": " + std::to_string(t.rows()) + " rows do not split into " +
                             std::to_string(t.rope_heads) + " heads of an even head_dim in " + where);
    }
    for (const auto& [name, t] : tensors)
        if (!wanted.count(name))
            throw ModelError(name + ": unexpected tensor in " + (t.file.empty() ? path.string() : t.file) +
                             " (the config has " + std::to_string(config.n_layers) + " layers" +
                             (config.tie_embeddings ? ", tied embeddings" : "") + ")");
}

namespace {

bool is_gguf_file(const fs::path& p) {
    std::string ext = p.extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return std::tolower(ch); });
    if (ext == ".gguf") return true;
    // A GGUF file under another name still starts with its magic.
    try {
        MappedFile f(p);
        return f.size() >= 4 && std::memcmp(f.data(), "GGUF", 4) == 0;
    } catch (const Error&) {
        return false;
    }
}

// A folder holding exactly one .gguf file is taken to mean that file.
std::optional<fs::path> single_gguf_in(const fs::path& dir) {
    std::optional<fs::path> found;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        if (!e.is_regular_file() || e.path().extension() != ".gguf") continue;
        if (found) return std::nullopt;
        found = e.path();
    }
    return found;
}

}  // namespace

std::unique_ptr<Model> load_model(const fs::path& path, const LoadProgress& progress) {
    std::error_code ec;
    const fs::file_status st = fs::status(path, ec);
    if (ec || !fs::exists(st)) throw FormatError(path.string() + ": no such file or folder");

    std::unique_ptr<Model> m;
    if (fs::is_regular_file(st)) {
        if (!is_gguf_file(path))
            throw FormatError(path.string() + ": not a model: expected a .gguf file or a folder with config.json "
                              "(Hugging Face) or params.json (Meta)");
        m = load_gguf(path, progress);
    } else if (fs::is_directory(st)) {
        // Meta's repositories on the Hub put params.json under original/ next to a Hugging Face config.json:
        // the folder itself is Hugging Face, and original/ can be opened as Meta.
        if (fs::exists(path / "config.json"))
            m = load_huggingface(path, progress);
        else if (fs::exists(path / "params.json"))
            m = load_meta(path, progress);
        else if (auto g = single_gguf_in(path))
            m = load_gguf(*g, progress);
        else
            throw FormatError("no model in " + path.string() +
                              ": expected config.json (Hugging Face), params.json (Meta) or a .gguf file");
    } else {
        throw FormatError(path.string() + ": not a regular file or folder");
    }
    m->validate_shapes();
    return m;
}

}  // namespace strata
