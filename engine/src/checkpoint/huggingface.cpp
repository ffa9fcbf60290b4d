// Hugging Face checkpoints: config.json (LlamaForCausalLM), generation_config.json, model.safetensors or the
// shards listed in model.safetensors.index.json, tokenizer.json. Names map onto Meta's (model.py); wq/wk keep
// their stored rows and are read through TensorView::rope_heads, which undoes the converter's permutation.
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.hpp"
#include "strata/error.hpp"
#include "strata/model.hpp"
#include "untrusted_json.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace strata {

namespace {

using untrusted_json::describe;

// config.json, generation_config.json and the shard index are a few KB (an 8B index: ~24 KB).
constexpr uintmax_t kMaxJsonFileBytes = 16ull << 20;

json read_json(const fs::path& file) {
    std::error_code ec;
    const uintmax_t size = fs::file_size(file, ec);
    if (!ec && size > kMaxJsonFileBytes)
        throw FormatError(file.string() + ": " + std::to_string(size) + " bytes is larger than the " +
                          std::to_string(kMaxJsonFileBytes) + "-byte limit for this file");
    std::ifstream f(file, std::ios::binary);
    if (!f) throw FormatError(file.string() + ": cannot open");
    std::ostringstream s;
    s << f.rdbuf();
    return untrusted_json::parse<FormatError>(s.str(), file.string());
}

// Typed reads of config fields: a missing required field or a wrong type names the file and the key.
struct Fields {
    const json& j;
    std::string file;

    bool has(const char* key) const { return j.contains(key) && !j[key].is_null(); }
    int64_t integer(const char* key) const {
        if (!has(key)) throw FormatError(file + ": missing \"" + key + "\"");
        const json& v = j[key];
        if (!v.is_number_integer()) throw FormatError(file + ": \"" + key + "\" must be an integer, found " + describe(v));
        return v.get<int64_t>();
    }
    int64_t integer(const char* key, int64_t fallback) const { return has(key) ? integer(key) : fallback; }
    double number(const char* key, double fallback) const {
        if (!has(key)) return fallback;
        const json& v = j[key];
        if (!v.is_number()) throw FormatError(file + ": \"" + key + "\" must be a number, found " + describe(v));
        return v.get<double>();
    }
    bool boolean(const char* key, bool fallback) const {
        if (!has(key)) return fallback;
        const json& v = j[key];
        if (!v.is_boolean()) throw FormatError(file + ": \"" + key + "\" must be true or false, found " + describe(v));
        return v.get<bool>();
    }
    // eos_token_id is an int in base models and a list in instruct ones.
    std::vector<int32_t> ids(const char* key) const {
        std::vector<int32_t> out;
        if (!has(key)) return out;
        const json& v = j[key];
        auto one = [&](const json& x) {
            if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > INT32_MAX)
                throw FormatError(file + ": \"" + key + "\" must hold token ids, found " + describe(v));
            out.push_back(static_cast<int32_t>(x.get<int64_t>()));
        };
        if (v.is_array())
            for (const json& x : v) one(x);
        else
            one(v);
        return out;
    }
};

int32_t token_id(const Fields& f, const char* key, int32_t fallback) {
    const int64_t v = f.integer(key, fallback);
    if (v < 0 || v > INT32_MAX) throw FormatError(f.file + ": \"" + key + "\" = " + std::to_string(v) + " is not a token id");
    return static_cast<int32_t>(v);
}

void require_false(const Fields& f, const char* key, const char* what) {
    if (f.boolean(key, false)) throw UnsupportedError(f.file + ": \"" + key + "\": true (" + what + ") is not supported");
}

bool contains_ci(std::string s, std::string_view needle) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    return s.find(needle) != std::string::npos;
}

std::string folder_name(const fs::path& dir) {
    fs::path p = dir.lexically_normal();
    if (p.filename().empty()) p = p.parent_path();
    std::string n = p.filename().string();
    return n.empty() ? dir.string() : n;
}

ModelConfig parse_config(const fs::path& dir) {
    const fs::path file = dir / "config.json";
    const json j = read_json(file);
    if (!j.is_object()) throw FormatError(file.string() + ": not a JSON object");
    const Fields f{j, file.string()};

    if (f.has("architectures")) {
        const json& a = j["architectures"];
        const bool llama = a.is_array() && std::any_of(a.begin(), a.end(), [](const json& x) {
                               return x.is_string() && x.get<std::string>() == "LlamaForCausalLM";
                           });
        if (!llama)
            throw UnsupportedError(file.string() + ": architectures " + describe(a) +
                                   " is not supported (Strata reads LlamaForCausalLM)");
    } else if (!(j.contains("model_type") && j["model_type"] == "llama")) {
        throw UnsupportedError(file.string() + ": neither \"architectures\": [\"LlamaForCausalLM\"] nor "
                               "\"model_type\": \"llama\"");
    }
    // Variants that would change the computation but that model.py (and so Strata) does not have.
    require_false(f, "attention_bias", "biases on q/k/v/o");
    require_false(f, "mlp_bias", "biases in the MLP");
    if (f.has("hidden_act") && j["hidden_act"] != "silu")
        throw UnsupportedError(file.string() + ": hidden_act " + describe(j["hidden_act"]) + " (Llama uses silu)");
    if (f.integer("pretraining_tp", 1) != 1)
        throw UnsupportedError(file.string() + ": pretraining_tp other than 1 is not supported");

    ModelConfig c;
    c.name = folder_name(dir);
    c.dim = f.integer("hidden_size");
    c.n_layers = f.integer("num_hidden_layers");
    c.n_heads = f.integer("num_attention_heads");
    c.n_kv_heads = f.integer("num_key_value_heads", c.n_heads);
    if (c.n_heads <= 0) throw FormatError(file.string() + ": num_attention_heads must be positive");
    c.head_dim = f.integer("head_dim", c.dim / c.n_heads);
    c.hidden_dim = f.integer("intermediate_size");
    c.vocab_size = f.integer("vocab_size");
    c.norm_eps = static_cast<float>(f.number("rms_norm_eps", 1e-5));
    c.rope_theta = static_cast<float>(f.number("rope_theta", 10000.0));  // LlamaConfig's default
    c.tie_embeddings = f.boolean("tie_word_embeddings", false);          // LlamaConfig's default
    c.max_seq_len = f.integer("max_position_embeddings", 8192);
    c.is_demo = f.boolean("strata_demo", false);
    c.demo_trained = c.is_demo && f.boolean("strata_demo_trained", false);
    if (c.is_demo && j.contains("strata_demo_description") && j["strata_demo_description"].is_string())
        c.demo_description = j["strata_demo_description"].get<std::string>();

    if (f.has("rope_scaling")) {
        const json& rs = j["rope_scaling"];
        if (!rs.is_object()) throw FormatError(file.string() + ": \"rope_scaling\" must be an object or null");
        const Fields r{rs, file.string() + ": rope_scaling"};
        // Older transformers wrote "type", newer "rope_type".
        std::string type = rs.contains("rope_type") ? describe(rs["rope_type"]) : rs.contains("type") ? describe(rs["type"]) : "";
        if (type != "\"llama3\"")
            throw UnsupportedError(file.string() + ": rope_scaling type " + (type.empty() ? "(none)" : type) +
                                   " is not supported (Strata implements Llama 3.1's \"llama3\")");
        c.rope_scaling.enabled = true;
        c.rope_scaling.factor = static_cast<float>(r.number("factor", 8.0));
        c.rope_scaling.low_freq_factor = static_cast<float>(r.number("low_freq_factor", 1.0));
        c.rope_scaling.high_freq_factor = static_cast<float>(r.number("high_freq_factor", 4.0));
        c.rope_scaling.original_max_position_embeddings = r.integer("original_max_position_embeddings", 8192);
    }

    c.bos_id = token_id(f, "bos_token_id", 128000);
    std::vector<int32_t> eos = f.ids("eos_token_id");
    // generation_config.json is what transformers' generate() stops on; config.json can be older or narrower.
    const fs::path gen_file = dir / "generation_config.json";
    if (fs::exists(gen_file)) {
        const json g = read_json(gen_file);
        if (!g.is_object()) throw FormatError(gen_file.string() + ": not a JSON object");
        const Fields gf{g, gen_file.string()};
        std::vector<int32_t> ge = gf.ids("eos_token_id");
        ge.insert(ge.end(), eos.begin(), eos.end());
        eos = std::move(ge);
        c.bos_id = token_id(gf, "bos_token_id", c.bos_id);
    }
    for (int32_t e : eos)
        if (std::find(c.eos_ids.begin(), c.eos_ids.end(), e) == c.eos_ids.end()) c.eos_ids.push_back(e);

    // Instruct or base? tokenizer_config.json's chat_template is no guide: base Llama 3.1 repositories ship one
    // too. What differs is the stop token: instruct models end a turn with <|eot_id|> (128009) and list it as an
    // eos; base models stop on <|end_of_text|> only. A folder named "...Instruct..." counts as well.
    constexpr int32_t kEotId = 128009;
    c.is_instruct = std::find(c.eos_ids.begin(), c.eos_ids.end(), kEotId) != c.eos_ids.end() ||
                    contains_ci(c.name, "instruct");
    return c;
}

// Hugging Face name -> canonical (Meta) name; "" for tensors that carry no weights we need.
std::string canonical_name(const std::string& hf, const std::string& file) {
    if (hf == "model.embed_tokens.weight") return "tok_embeddings";
    if (hf == "model.norm.weight") return "norm";
    if (hf == "lm_head.weight") return "output";
    static const std::pair<const char*, const char*> kLayer[] = {
        {"self_attn.q_proj.weight", "attention.wq"},   {"self_attn.k_proj.weight", "attention.wk"},
        {"self_attn.v_proj.weight", "attention.wv"},   {"self_attn.o_proj.weight", "attention.wo"},
        {"mlp.gate_proj.weight", "feed_forward.w1"},   {"mlp.down_proj.weight", "feed_forward.w2"},
        {"mlp.up_proj.weight", "feed_forward.w3"},     {"input_layernorm.weight", "attention_norm"},
        {"post_attention_layernorm.weight", "ffn_norm"},
    };
    const std::string prefix = "model.layers.";
    if (hf.rfind(prefix, 0) == 0) {
        size_t i = prefix.size(), j = i;
        while (j < hf.size() && std::isdigit(static_cast<unsigned char>(hf[j])) && j - i < 6) ++j;
        if (j > i && j < hf.size() && hf[j] == '.' && !(hf[i] == '0' && j - i > 1)) {
            const int64_t n = std::stoll(hf.substr(i, j - i));
            const std::string rest = hf.substr(j + 1);
            for (const auto& [from, to] : kLayer)
                if (rest == from) return names::layer(n, to);
            // Older transformers saved the RoPE inverse frequencies; they are derived from the config.
            if (rest == "self_attn.rotary_emb.inv_freq") return "";
        }
    }
    throw UnsupportedError(file + ": tensor " + hf + " is not part of a Llama model (LlamaForCausalLM has no such "
                           "weight)");
}

// The safetensors files of the checkpoint and, for sharded ones, which tensors each must hold.
struct Shards {
    std::vector<fs::path> files;
    std::map<std::string, std::string> weight_map;  // tensor -> shard file name (empty when not sharded)
};

Shards find_shards(const fs::path& dir) {
    Shards s;
    const fs::path index = dir / "model.safetensors.index.json";
    if (fs::exists(index)) {
        const json j = read_json(index);
        if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
            throw FormatError(index.string() + ": no \"weight_map\" object");
        std::set<std::string> seen;
        for (const auto& [tensor, shard] : j["weight_map"].items()) {
            if (!shard.is_string())
                throw FormatError(index.string() + ": weight_map[\"" + tensor + "\"] is not a file name");
            const std::string name = shard.get<std::string>();
            // Shards sit beside the index; a path that leaves the folder is not a shard.
            const fs::path rel(name);
            if (name.empty() || rel.is_absolute() || rel.has_parent_path() || name == "." || name == "..")
                throw FormatError(index.string() + ": weight_map[\"" + tensor + "\"] = \"" + name +
                                  "\" is not a file name in the folder");
            if (!fs::is_regular_file(dir / rel))
                throw FormatError(index.string() + " names shard " + name + " (for " + tensor +
                                  ") but " + (dir / rel).string() + " does not exist");
            s.weight_map[tensor] = name;
            if (seen.insert(name).second) s.files.push_back(dir / rel);
        }
        if (s.files.empty()) throw FormatError(index.string() + ": weight_map is empty");
        std::sort(s.files.begin(), s.files.end());
        return s;
    }
    if (fs::exists(dir / "model.safetensors")) {
        s.files.push_back(dir / "model.safetensors");
        return s;
    }
    // Some exports name a single file differently; take every .safetensors in the folder.
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
        if (e.is_regular_file() && e.path().extension() == ".safetensors") s.files.push_back(e.path());
    if (s.files.empty()) {
        const bool bin = fs::exists(dir / "pytorch_model.bin") || fs::exists(dir / "pytorch_model.bin.index.json");
        if (bin)
            throw UnsupportedError(dir.string() + ": only pytorch_model.bin weights; Strata reads safetensors "
                                   "(model.safetensors or model.safetensors.index.json)");
        throw FormatError(dir.string() + ": no weights: expected model.safetensors or model.safetensors.index.json");
    }
    std::sort(s.files.begin(), s.files.end());
    return s;
}

void check_cancel(const LoadProgress& p) {
    if (p.cancel && p.cancel->load()) throw Cancelled();
}

}  // namespace

std::unique_ptr<Model> load_huggingface(const fs::path& dir, const LoadProgress& progress) {
    if (!fs::is_directory(dir)) throw FormatError(dir.string() + ": not a folder");
    if (!fs::exists(dir / "config.json"))
        throw FormatError("no model in " + dir.string() + ": expected config.json (Hugging Face)");

    auto m = std::make_unique<Model>();
    m->format = CheckpointFormat::HuggingFace;
    m->path = dir;
    m->config = parse_config(dir);
    m->config.validate();

    const Shards shards = find_shards(dir);
    uint64_t bytes_total = 0, bytes_done = 0;
    for (const fs::path& p : shards.files) bytes_total += fs::file_size(p);
    int64_t tensors_done = 0;
    const int64_t tensors_total = static_cast<int64_t>(shards.weight_map.size());

    for (const fs::path& p : shards.files) {
        check_cancel(progress);
        MappedFile file(p);
        const std::string fname = p.string();
        const safetensors::Header header = safetensors::parse(file.bytes(), fname);
        const std::string shard_name = p.filename().string();
        for (const safetensors::Entry& e : header.tensors) {
            if (!shards.weight_map.empty()) {
                auto it = shards.weight_map.find(e.name);
                // A tensor the index puts in another shard is a stale or foreign copy: the index decides.
                if (it != shards.weight_map.end() && it->second != shard_name) continue;
            }
            const std::string name = canonical_name(e.name, fname);
            if (name.empty()) continue;
            if (name == "output" && m->config.tie_embeddings) continue;  // tied: transformers ignores the copy too
            if (m->tensors.count(name))
                throw FormatError(fname + ": tensor " + e.name + " appears twice (also in " + m->tensors[name].file + ")");
            TensorView t;
            t.name = name;
            t.source_name = e.name;
            t.dtype = e.dtype;
            t.shape = e.shape;
            t.data = file.data() + e.offset;
            t.nbytes = e.nbytes;
            t.file = fname;
            t.file_offset = e.offset;
            // convert_llama_weights_to_hf.py permuted q/k rows per head for rotate-half RoPE.
            if (name.ends_with(".attention.wq")) t.rope_heads = static_cast<int32_t>(m->config.n_heads);
            if (name.ends_with(".attention.wk")) t.rope_heads = static_cast<int32_t>(m->config.n_kv_heads);
            m->tensors.emplace(name, std::move(t));
            ++tensors_done;
        }
        std::set<std::string> present;
        for (const safetensors::Entry& e : header.tensors) present.insert(e.name);
        for (const auto& [tensor, shard] : shards.weight_map)
            if (shard == shard_name && !present.count(tensor))
                throw FormatError((dir / "model.safetensors.index.json").string() + " puts " + tensor + " in " +
                                  shard_name + ", but " + fname + " has no such tensor");
        m->files.push_back(std::move(file));
        bytes_done += fs::file_size(p);
        if (progress.on_progress)
            progress.on_progress(bytes_done, bytes_total, tensors_done,
                                 tensors_total ? tensors_total : tensors_done);
    }

    m->validate_shapes();

    check_cancel(progress);
    // tokenizer.json, or tokenizer.model when a folder only has Meta's rank file; TokenizerError names what is missing.
    m->tokenizer = load_tokenizer_for(dir);
    if (m->tokenizer.vocab_size() > m->config.vocab_size)
        throw ModelError(dir.string() + ": the tokenizer has " + std::to_string(m->tokenizer.vocab_size()) +
                         " tokens, but the embedding table has only " + std::to_string(m->config.vocab_size) + " rows");
    return m;
}

}  // namespace strata
