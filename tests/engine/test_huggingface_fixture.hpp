#pragma once
// Hand-made Hugging Face checkpoints for the checkpoint tests. The safetensors bytes are written here, by the
// test, independently of the engine's writer, so that lying headers can be made and the parser is checked
// against a second implementation of the format.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "catch.hpp"
#include "strata/dtype.hpp"
#include "support.hpp"

namespace strata::test::hf {

struct StTensor {
    std::string name;            // Hugging Face name
    std::string dtype;           // "BF16", "F16", "F32"
    std::vector<int64_t> shape;
    std::vector<float> values;   // what the bytes encode (after rounding to dtype)
    std::string bytes;
};

inline std::string encode(const std::string& dtype, const std::vector<float>& v) {
    std::string out;
    for (float x : v) {
        if (dtype == "F32") {
            out.append(reinterpret_cast<const char*>(&x), 4);
        } else {
            const uint16_t h = dtype == "BF16" ? f32_to_bf16(x) : f32_to_f16(x);
            out.append(reinterpret_cast<const char*>(&h), 2);
        }
    }
    return out;
}

// Values that survive bf16/f16 exactly (k/64 for small k), deterministic and different in every position.
inline StTensor make_tensor(const std::string& name, const std::string& dtype, std::vector<int64_t> shape,
                            uint32_t salt) {
    StTensor t{name, dtype, std::move(shape), {}, {}};
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    uint32_t s = 2166136261u ^ salt;
    t.values.resize(static_cast<size_t>(n));
    for (auto& x : t.values) {
        s = s * 1664525u + 1013904223u;
        x = static_cast<float>(static_cast<int32_t>((s >> 16) % 127) - 63) / 64.0f;
    }
    t.bytes = encode(dtype, t.values);
    return t;
}

// 8-byte little-endian length, the header text, then the data.
inline std::string safetensors_bytes(const std::string& header_text, const std::string& data) {
    std::string out(8, '\0');
    const uint64_t n = header_text.size();
    for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
    return out + header_text + data;
}

// A truthful header for tensors laid out back to back, and the data.
inline std::pair<nlohmann::json, std::string> layout(const std::vector<StTensor>& ts) {
    nlohmann::json h = {{"__metadata__", {{"format", "pt"}}}};
    std::string data;
    for (const auto& t : ts) {
        h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
        data += t.bytes;
    }
    return {h, data};
}

inline nlohmann::json tiny_config() {
    return {
        {"architectures", {"LlamaForCausalLM"}},
        {"model_type", "llama"},
        {"hidden_size", 16},
        {"intermediate_size", 24},
        {"num_hidden_layers", 2},
        {"num_attention_heads", 4},
        {"num_key_value_heads", 2},
        {"head_dim", 4},
        {"vocab_size", 128256},
        {"rms_norm_eps", 1e-5},
        {"rope_theta", 500000.0},
        {"max_position_embeddings", 8192},
        {"tie_word_embeddings", false},
        {"bos_token_id", 128000},
        {"eos_token_id", 128001},
    };
}

// Every tensor LlamaForCausalLM has for `config`, in mixed dtypes so all three are read.
inline std::vector<StTensor> tiny_tensors(const nlohmann::json& c) {
    const int64_t d = c["hidden_size"], f = c["intermediate_size"], v = c["vocab_size"];
    const int64_t heads = c["num_attention_heads"];
    const int64_t hd = c.value("head_dim", d / heads), q = heads * hd,
                  kv = c.value("num_key_value_heads", heads) * hd;
    std::vector<StTensor> ts;
    uint32_t salt = 1;
    ts.push_back(make_tensor("model.embed_tokens.weight", "BF16", {v, d}, salt++));
    for (int64_t l = 0; l < int64_t(c["num_hidden_layers"]); ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        ts.push_back(make_tensor(p + "self_attn.q_proj.weight", "BF16", {q, d}, salt++));
        ts.push_back(make_tensor(p + "self_attn.k_proj.weight", "F16", {kv, d}, salt++));
        ts.push_back(make_tensor(p + "self_attn.v_proj.weight", "F32", {kv, d}, salt++));
        ts.push_back(make_tensor(p + "self_attn.o_proj.weight", "BF16", {d, q}, salt++));
        ts.push_back(make_tensor(p + "mlp.gate_proj.weight", "BF16", {f, d}, salt++));
        ts.push_back(make_tensor(p + "mlp.down_proj.weight", "F16", {d, f}, salt++));
        ts.push_back(make_tensor(p + "mlp.up_proj.weight", "BF16", {f, d}, salt++));
        ts.push_back(make_tensor(p + "input_layernorm.weight", "F32", {d}, salt++));
        ts.push_back(make_tensor(p + "post_attention_layernorm.weight", "F32", {d}, salt++));
    }
    ts.push_back(make_tensor("model.norm.weight", "F32", {d}, salt++));
    if (!c.value("tie_word_embeddings", false)) ts.push_back(make_tensor("lm_head.weight", "BF16", {v, d}, salt++));
    return ts;
}

// A folder with config.json, the tokenizer (symlinked) and a model.safetensors made from `header` and `data`.
inline std::filesystem::path write_folder(const std::string& tag, const nlohmann::json& config,
                                          const std::string& safetensors, bool with_tokenizer = true) {
    auto dir = temp_dir(tag);
    write_file(dir / "config.json", config.dump(2));
    write_file(dir / "model.safetensors", safetensors);
    if (with_tokenizer) std::filesystem::create_symlink(tokenizer_json(), dir / "tokenizer.json");
    return dir;
}

inline std::filesystem::path write_tiny(const std::string& tag, const nlohmann::json& config = tiny_config()) {
    auto [h, data] = layout(tiny_tensors(config));
    return write_folder(tag, config, safetensors_bytes(h.dump(), data));
}

// Hugging Face's permute() from convert_llama_weights_to_hf.py, written out in torch's index order:
//   w.view(n_heads, dim1 // n_heads // 2, 2, dim2).transpose(1, 2).reshape(dim1, dim2)
// The output element [h, p, i, c] is the input element [h, i, p, c].
inline std::vector<float> hf_permute(const std::vector<float>& w, int64_t n_heads, int64_t rows, int64_t cols) {
    const int64_t half = rows / n_heads / 2;
    std::vector<float> out(w.size());
    for (int64_t h = 0; h < n_heads; ++h)
        for (int64_t p = 0; p < 2; ++p)
            for (int64_t i = 0; i < half; ++i)
                for (int64_t c = 0; c < cols; ++c)
                    out[static_cast<size_t>(((h * 2 + p) * half + i) * cols + c)] =
                        w[static_cast<size_t>(((h * half + i) * 2 + p) * cols + c)];
    return out;
}

// Reads one tensor of a safetensors file as float32, with nothing from the engine but the scalar conversions.
inline std::vector<float> read_raw(const std::filesystem::path& file, const std::string& name) {
    const std::string bytes = read_file(file);
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    const nlohmann::json h = nlohmann::json::parse(bytes.substr(8, n));
    const nlohmann::json& e = h.at(name);
    const uint64_t b = e["data_offsets"][0], end = e["data_offsets"][1];
    REQUIRE(e["dtype"] == "BF16");
    std::vector<float> out;
    for (uint64_t o = 8 + n + b; o < 8 + n + end; o += 2) {
        uint16_t x;
        std::memcpy(&x, bytes.data() + o, 2);
        out.push_back(bf16_to_f32(x));
    }
    return out;
}

// Runs f, expecting an E; returns its message (a different exception type fails the test by propagating).
template <class E, class F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const E& e) {
        return e.what();
    }
    FAIL("expected an exception, none was thrown");
    return {};
}

}  // namespace strata::test::hf
