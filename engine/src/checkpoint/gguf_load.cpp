// GGUF checkpoints of Llama 3 (llama.cpp's "llama" architecture): metadata -> ModelConfig, the embedded GPT-2 style
// vocabulary -> Tokenizer, tensors -> canonical views mapped in place.
//
// Layout: llama.cpp's converter un-permutes Hugging Face's q/k rows back to Meta's interleaved pairs (ggml's
// "normal" RoPE rotates adjacent pairs), so GGUF rows are already canonical and rope_heads stays 0.
//
// RoPE scaling: Llama 3.1 files carry `rope_freqs.weight`, one factor per frequency pair (head_dim / 2 floats).
// They are kept in Model::rope_freqs_factors and config.rope_scaling is switched off, because the factors already
// are the scaling: the backend calls rope_frequencies(config, factors), which gives pair i the frequency
// theta^(-2i/head_dim) / factors[i] (what ggml's rope does with freq_factors, and exactly Meta's apply_scaling
// when the factors come from it). Applying apply_scaling as well would scale twice.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>

#include "strata/error.hpp"
#include "strata/gguf.hpp"
#include "strata/model.hpp"

namespace fs = std::filesystem;

namespace strata {

namespace {

using gguf::Value;
using gguf::ValueType;

struct Meta {
    const gguf::File& f;
    std::string file;

    const Value* get(const std::string& key) const { return f.find(key); }

    [[noreturn]] void wrong_type(const std::string& key, const Value& v, const char* expected) const {
        throw FormatError(file + ": metadata " + key + " must be " + expected + ", found " +
                          std::string(value_type_name(v.type)));
    }

    int64_t integer(const std::string& key) const {
        const Value* v = get(key);
        if (!v) throw FormatError(file + ": missing metadata " + key);
        return integer_of(key, *v);
    }
    int64_t integer(const std::string& key, int64_t fallback) const {
        const Value* v = get(key);
        return v ? integer_of(key, *v) : fallback;
    }
    int64_t integer_of(const std::string& key, const Value& v) const {
        if (!v.is_integer()) wrong_type(key, v, "an integer");
        const bool is_signed = v.type == ValueType::Int8 || v.type == ValueType::Int16 ||
                               v.type == ValueType::Int32 || v.type == ValueType::Int64;
        if (!is_signed && v.u > static_cast<uint64_t>(INT64_MAX))
            throw FormatError(file + ": metadata " + key + " = " + std::to_string(v.u) + " is out of range");
        return is_signed ? v.i : static_cast<int64_t>(v.u);
    }
    double number(const std::string& key, double fallback) const {
        const Value* v = get(key);
        if (!v) return fallback;
        if (v->is_float()) return v->f;
        return static_cast<double>(integer_of(key, *v));
    }
    std::string string(const std::string& key, const std::string& fallback) const {
        const Value* v = get(key);
        if (!v) return fallback;
        if (v->type != ValueType::String) wrong_type(key, *v, "a string");
        return v->str;
    }
    const std::vector<std::string>* strings(const std::string& key) const {
        const Value* v = get(key);
        if (!v) return nullptr;
        if (v->type != ValueType::Array || v->elem != ValueType::String) wrong_type(key, *v, "an array of strings");
        return &v->strings;
    }
    const std::vector<int64_t>* ints(const std::string& key) const {
        const Value* v = get(key);
        if (!v) return nullptr;
        const bool int_elems = v->elem != ValueType::String && v->elem != ValueType::Array &&
                               v->elem != ValueType::Float32 && v->elem != ValueType::Float64;
        if (v->type != ValueType::Array || !int_elems) wrong_type(key, *v, "an array of integers");
        return &v->ints;
    }
};

// GGUF tensor name -> canonical (Meta) name; "" for rope_freqs, which is not a weight.
std::string canonical_name(const std::string& g, const std::string& file) {
    if (g == "token_embd.weight") return "tok_embeddings";
    if (g == "output_norm.weight") return "norm";
    if (g == "output.weight") return "output";
    if (g == "rope_freqs.weight") return "";
    static const std::pair<const char*, const char*> kLayer[] = {
        {"attn_q.weight", "attention.wq"},      {"attn_k.weight", "attention.wk"},
        {"attn_v.weight", "attention.wv"},      {"attn_output.weight", "attention.wo"},
        {"ffn_gate.weight", "feed_forward.w1"}, {"ffn_down.weight", "feed_forward.w2"},
        {"ffn_up.weight", "feed_forward.w3"},   {"attn_norm.weight", "attention_norm"},
        {"ffn_norm.weight", "ffn_norm"},
    };
    if (g.rfind("blk.", 0) == 0) {
        size_t i = 4, j = i;
        while (j < g.size() && std::isdigit(static_cast<unsigned char>(g[j])) && j - i < 6) ++j;
        if (j > i && j < g.size() && g[j] == '.' && !(g[i] == '0' && j - i > 1)) {
            const int64_t n = std::stoll(g.substr(i, j - i));
            const std::string rest = g.substr(j + 1);
            for (const auto& [from, to] : kLayer)
                if (rest == from) return names::layer(n, to);
        }
    }
    throw UnsupportedError(file + ": tensor " + g + " is not part of a Llama model (llama.cpp's llama architecture "
                           "has no such weight)");
}

std::string file_stem(const fs::path& p) {
    std::string s = p.stem().string();
    return s.empty() ? p.string() : s;
}

bool contains_ci(std::string s, std::string_view needle) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    return s.find(needle) != std::string::npos;
}

int32_t token_id(const Meta& m, const std::string& key, int64_t v, int64_t n_tokens) {
    if (v < 0 || v >= n_tokens)
        throw FormatError(m.file + ": metadata " + key + " = " + std::to_string(v) + " is not a token id (the "
                          "vocabulary has " + std::to_string(n_tokens) + " tokens)");
    return static_cast<int32_t>(v);
}

ModelConfig parse_config(const Meta& m, const fs::path& path, int64_t n_tokens) {
    const std::string arch = m.string("general.architecture", "");
    if (arch != "llama")
        throw UnsupportedError(m.file + ": general.architecture is \"" + arch +
                               "\"; Strata reads Llama models (\"llama\")");
    ModelConfig c;
    c.name = file_stem(path);
    c.dim = m.integer("llama.embedding_length");
    c.n_layers = m.integer("llama.block_count");
    c.n_heads = m.integer("llama.attention.head_count");
    c.n_kv_heads = m.integer("llama.attention.head_count_kv", c.n_heads);
    if (c.n_heads <= 0) throw FormatError(m.file + ": llama.attention.head_count must be positive");
    c.head_dim = m.integer("llama.attention.key_length", c.dim / c.n_heads);
    if (m.integer("llama.attention.value_length", c.head_dim) != c.head_dim)
        throw UnsupportedError(m.file + ": llama.attention.value_length differs from key_length (Llama has one "
                               "head_dim)");
    const int64_t rope_dims = m.integer("llama.rope.dimension_count", c.head_dim);
    if (rope_dims != c.head_dim)
        throw UnsupportedError(m.file + ": llama.rope.dimension_count " + std::to_string(rope_dims) +
                               " rotates part of each head of " + std::to_string(c.head_dim) +
                               "; Llama rotates all of it");
    c.hidden_dim = m.integer("llama.feed_forward_length");
    c.vocab_size = m.integer("llama.vocab_size", n_tokens);
    c.norm_eps = static_cast<float>(m.number("llama.attention.layer_norm_rms_epsilon", 1e-5));
    c.rope_theta = static_cast<float>(m.number("llama.rope.freq_base", 10000.0));  // ggml's default
    c.max_seq_len = m.integer("llama.context_length", 8192);
    if (const Value* v = m.get("llama.rope.scaling.type")) {
        if (v->type != ValueType::String || (v->str != "none" && !v->str.empty()))
            throw UnsupportedError(m.file + ": llama.rope.scaling.type " +
                                   (v->type == ValueType::String ? "\"" + v->str + "\"" : std::string("?")) +
                                   " is not supported (Llama 3.1 scaling comes as rope_freqs.weight)");
    }

    c.bos_id = token_id(m, "tokenizer.ggml.bos_token_id", m.integer("tokenizer.ggml.bos_token_id", 128000), n_tokens);
    // Strata's own list keeps every stop id of a Hugging Face generation_config; other files have one eos (plus
    // llama.cpp's separate end-of-turn / end-of-message ids).
    if (const std::vector<int64_t>* all = m.ints("strata.eos_token_ids")) {
        for (int64_t e : *all) c.eos_ids.push_back(token_id(m, "strata.eos_token_ids", e, n_tokens));
    } else {
        for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eom_token_id",
                                "tokenizer.ggml.eot_token_id"}) {
            if (!m.get(key)) continue;
            const int32_t e = token_id(m, key, m.integer(key), n_tokens);
            if (std::find(c.eos_ids.begin(), c.eos_ids.end(), e) == c.eos_ids.end()) c.eos_ids.push_back(e);
        }
    }
    if (const Value* d = m.get("strata.demo")) c.is_demo = d->type == ValueType::Bool && d->u != 0;
    // As for Hugging Face folders: instruct models stop on <|eot_id|>; the file name may also say so.
    constexpr int32_t kEotId = 128009;
    c.is_instruct = std::find(c.eos_ids.begin(), c.eos_ids.end(), kEotId) != c.eos_ids.end() ||
                    contains_ci(c.name, "instruct") || contains_ci(m.string("general.name", ""), "instruct");
    return c;
}

Tokenizer load_tokenizer(const Meta& m) {
    const std::string model = m.string("tokenizer.ggml.model", "");
    if (model.empty()) throw TokenizerError(m.file + ": no tokenizer (metadata tokenizer.ggml.model is missing)");
    if (model != "gpt2")
        throw TokenizerError(m.file + ": tokenizer.ggml.model is \"" + model +
                             "\"; Llama 3 uses byte-level BPE (\"gpt2\")");
    // The pre-tokenizer names the split regex; Strata implements Llama 3's. llama.cpp treats smaug-bpe the same.
    const std::string pre = m.string("tokenizer.ggml.pre", "llama-bpe");
    if (pre != "llama-bpe" && pre != "smaug-bpe")
        throw UnsupportedError(m.file + ": tokenizer.ggml.pre \"" + pre +
                               "\" is not supported (Strata implements Llama 3's split pattern, \"llama-bpe\")");
    const std::vector<std::string>* tokens = m.strings("tokenizer.ggml.tokens");
    if (!tokens) throw TokenizerError(m.file + ": no tokenizer (metadata tokenizer.ggml.tokens is missing)");
    std::vector<int32_t> types;
    if (const std::vector<int64_t>* t = m.ints("tokenizer.ggml.token_type")) {
        if (t->size() != tokens->size())
            throw TokenizerError(m.file + ": tokenizer.ggml.token_type has " + std::to_string(t->size()) +
                                 " entries for " + std::to_string(tokens->size()) + " tokens");
        types.reserve(t->size());
        for (int64_t x : *t) types.push_back(static_cast<int32_t>(x));
    } else {
        types.assign(tokens->size(), 1);  // llama.cpp's LLAMA_TOKEN_TYPE_NORMAL
    }
    static const std::vector<std::string> kNoMerges;
    const std::vector<std::string>* merges = m.strings("tokenizer.ggml.merges");
    return Tokenizer::from_gguf_vocab(*tokens, types, merges ? *merges : kNoMerges);
}

// rope_freqs.weight as floats (llama.cpp writes F32; F16/BF16 are widened the same way the weights are).
std::vector<float> read_factors(const gguf::TensorInfo& t, const gguf::TypeInfo& ti, const MappedFile& file) {
    TensorView v;
    v.name = v.source_name = t.name;
    v.dtype = *ti.dtype;
    v.shape = {static_cast<int64_t>(t.numel())};
    v.data = file.data() + t.file_offset;
    v.nbytes = t.nbytes;
    return v.to_f32();
}

}  // namespace

std::unique_ptr<Model> load_gguf(const fs::path& path, const LoadProgress& progress) {
    if (progress.cancel && progress.cancel->load()) throw Cancelled();
    auto m = std::make_unique<Model>();
    m->format = CheckpointFormat::GGUF;
    m->path = path;
    MappedFile file(path);
    const std::string fname = path.string();
    const gguf::File g = gguf::parse(file.bytes(), fname);
    const Meta meta{g, fname};

    const std::vector<std::string>* tokens = meta.strings("tokenizer.ggml.tokens");
    if (!tokens || tokens->empty())
        throw TokenizerError(fname + ": no tokenizer (metadata tokenizer.ggml.tokens is missing or empty)");
    const auto n_tokens = static_cast<int64_t>(tokens->size());
    m->config = parse_config(meta, path, n_tokens);

    bool has_output = false;
    const gguf::TensorInfo* rope_freqs = nullptr;
    for (const gguf::TensorInfo& t : g.tensors) {
        const std::string name = canonical_name(t.name, fname);
        const gguf::TypeInfo& ti = *gguf::type_info(t.type);  // parse() rejected unknown ids
        // F32/F16/BF16 and the block types of Q4_K_M / Q5_K_M files (strata/quant.hpp); other ggml types are
        // named in the error. parse() has checked that rows are whole blocks and the bytes lie in the file;
        // block contents (finite scales) are validated by the backend that loads them.
        if (!ti.dtype)
            throw UnsupportedError("not supported yet: " + std::string(ti.name) + " in " + t.name + " (" + fname +
                                   "; Strata reads F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K and Q6_K)");
        if (name.empty() && dtype_is_block(*ti.dtype))
            throw UnsupportedError(fname + ": rope_freqs.weight is " + std::string(ti.name) +
                                   "; Strata reads its factors as F32, F16 or BF16");
        if (name.empty()) {
            rope_freqs = &t;
            continue;
        }
        if (t.ne.size() > 2)
            throw ModelError(fname + ": tensor " + t.name + " has " + std::to_string(t.ne.size()) +
                             " dimensions; Llama weights have 1 or 2");
        if (name == "output") has_output = true;
        TensorView v;
        v.name = name;
        v.source_name = t.name;
        v.dtype = *ti.dtype;
        v.shape = t.torch_shape();
        v.data = file.data() + t.file_offset;
        v.nbytes = t.nbytes;
        v.file = fname;
        v.file_offset = t.file_offset;
        m->tensors.emplace(name, std::move(v));
    }
    // Llama 3.2 ties the output projection to the embeddings and llama.cpp then writes no output.weight.
    m->config.tie_embeddings = !has_output;

    if (rope_freqs) {
        const int64_t pairs = m->config.head_dim / 2;
        if (rope_freqs->ne.size() != 1 || static_cast<int64_t>(rope_freqs->ne[0]) != pairs)
            throw ModelError(fname + ": rope_freqs.weight has " + std::to_string(rope_freqs->numel()) +
                             " factors, expected head_dim / 2 = " + std::to_string(pairs));
        m->rope_freqs_factors = read_factors(*rope_freqs, *gguf::type_info(rope_freqs->type), file);
        for (size_t i = 0; i < m->rope_freqs_factors.size(); ++i) {
            const float x = m->rope_freqs_factors[i];
            if (!(x > 0.0f) || !std::isfinite(x))
                throw ModelError(fname + ": rope_freqs.weight[" + std::to_string(i) + "] = " + std::to_string(x) +
                                 " is not a positive factor");
        }
        m->config.rope_scaling.enabled = false;  // the factors are the scaling (see the top of this file)
    }

    m->files.push_back(std::move(file));
    m->validate_shapes();
    if (progress.on_progress) {
        const uint64_t bytes = m->files.back().size();
        const auto n = static_cast<int64_t>(m->tensors.size());
        progress.on_progress(bytes, bytes, n, n);
    }
    if (progress.cancel && progress.cancel->load()) throw Cancelled();

    m->tokenizer = load_tokenizer(meta);
    if (m->tokenizer.vocab_size() > m->config.vocab_size)
        throw ModelError(fname + ": " + std::to_string(m->tokenizer.vocab_size()) +
                         " tokens, but the embedding table has only " + std::to_string(m->config.vocab_size) + " rows");
    return m;
}

}  // namespace strata
