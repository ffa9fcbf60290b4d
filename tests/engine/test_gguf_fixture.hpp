#pragma once
// A tiny Llama GGUF assembled byte by byte in the tests, following ggml's docs/gguf.md directly (not through
// strata::gguf::Writer), so the reader is checked against an encoder written independently of it. Every part can
// be bent to make a bad file: magic, version, counts, key/value types, tensor types, offsets, data.
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "strata/tokenizer.hpp"

namespace strata::test {

struct GgufBytes {
    std::string b;
    template <typename T>
    void put(T v) {
        char c[sizeof(T)];
        std::memcpy(c, &v, sizeof(T));
        b.append(c, sizeof(T));
    }
    void str(const std::string& s) {
        put<uint64_t>(s.size());
        b += s;
    }
};

// GGUF value type ids (docs/gguf.md).
enum : uint32_t { kU8 = 0, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7, kStr = 8, kArr = 9, kU64 = 10 };

struct TinyTensor {
    std::string name;
    std::vector<uint64_t> ne;
    uint32_t type = 0;  // GGML_TYPE_F32
    std::string data;   // the bytes
    std::optional<uint64_t> offset;  // default: next aligned offset
};

struct TinyGguf {
    uint32_t magic = 0x46554747;
    uint32_t version = 3;
    uint64_t alignment = 32;  // must match general.alignment when that is set
    std::optional<uint64_t> tensor_count, kv_count;  // override the true counts
    std::vector<std::pair<std::string, std::function<void(GgufBytes&)>>> kv;
    std::vector<TinyTensor> tensors;

    void set_u32(const std::string& k, uint32_t v) {
        kv.push_back({k, [v](GgufBytes& o) { o.put<uint32_t>(kU32), o.put<uint32_t>(v); }});
    }
    void set_f32(const std::string& k, float v) {
        kv.push_back({k, [v](GgufBytes& o) { o.put<uint32_t>(kF32), o.put<float>(v); }});
    }
    void set_str(const std::string& k, const std::string& v) {
        kv.push_back({k, [v](GgufBytes& o) { o.put<uint32_t>(kStr), o.str(v); }});
    }
    void set_strs(const std::string& k, const std::vector<std::string>& v) {
        kv.push_back({k, [v](GgufBytes& o) {
                          o.put<uint32_t>(kArr), o.put<uint32_t>(kStr), o.put<uint64_t>(v.size());
                          for (const auto& s : v) o.str(s);
                      }});
    }
    void set_i32s(const std::string& k, const std::vector<int32_t>& v) {
        kv.push_back({k, [v](GgufBytes& o) {
                          o.put<uint32_t>(kArr), o.put<uint32_t>(kI32), o.put<uint64_t>(v.size());
                          for (int32_t x : v) o.put<int32_t>(x);
                      }});
    }
    void erase(const std::string& k) {
        std::erase_if(kv, [&](const auto& e) { return e.first == k; });
    }
    TinyTensor* tensor(const std::string& name) {
        for (TinyTensor& t : tensors)
            if (t.name == name) return &t;
        return nullptr;
    }
    void drop(const std::string& name) {
        std::erase_if(tensors, [&](const TinyTensor& t) { return t.name == name; });
    }

    std::string build() const {
        GgufBytes o;
        o.put<uint32_t>(magic);
        o.put<uint32_t>(version);
        o.put<uint64_t>(tensor_count.value_or(tensors.size()));
        o.put<uint64_t>(kv_count.value_or(kv.size()));
        for (const auto& [k, write] : kv) {
            o.str(k);
            write(o);
        }
        std::vector<uint64_t> offsets;
        uint64_t next = 0;
        for (const TinyTensor& t : tensors) {
            const uint64_t off = t.offset.value_or(next);
            offsets.push_back(off);
            next = std::max(next, (off + t.data.size() + alignment - 1) / alignment * alignment);
            o.str(t.name);
            o.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
            for (uint64_t n : t.ne) o.put<uint64_t>(n);
            o.put<uint32_t>(t.type);
            o.put<uint64_t>(off);
        }
        while (o.b.size() % alignment) o.b.push_back('\0');
        const size_t data_start = o.b.size();
        for (size_t i = 0; i < tensors.size(); ++i) {
            const size_t at = data_start + offsets[i];
            if (offsets[i] > (uint64_t(1) << 30)) continue;  // a lying offset: its data is simply not there
            if (o.b.size() < at + tensors[i].data.size()) o.b.resize(at + tensors[i].data.size(), '\0');
            std::memcpy(o.b.data() + at, tensors[i].data.data(), tensors[i].data.size());
        }
        return o.b;
    }
};

// float32 bytes with value(i) for element i.
inline std::string f32_data(uint64_t n, const std::function<float(uint64_t)>& value) {
    std::string s(n * 4, '\0');
    for (uint64_t i = 0; i < n; ++i) {
        const float v = value(i);
        std::memcpy(s.data() + 4 * i, &v, 4);
    }
    return s;
}

// A complete tiny Llama: dim, 1 layer, 2 query heads : 1 KV head, FFN 16, a byte-level vocabulary of 256 byte
// tokens plus <|begin_of_text|> and <|end_of_text|>, F32 weights where element i of tensor k is k + i / 1024.
inline TinyGguf tiny_llama(uint64_t dim = 8) {
    const uint64_t vocab = 258, hidden = 16, kv = dim / 2;
    TinyGguf g;
    g.set_str("general.architecture", "llama");
    g.set_str("general.name", "tiny");
    g.set_u32("llama.context_length", 64);
    g.set_u32("llama.embedding_length", static_cast<uint32_t>(dim));
    g.set_u32("llama.block_count", 1);
    g.set_u32("llama.feed_forward_length", static_cast<uint32_t>(hidden));
    g.set_u32("llama.attention.head_count", 2);
    g.set_u32("llama.attention.head_count_kv", 1);
    g.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    g.set_f32("llama.rope.freq_base", 500000.0f);
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    for (int b = 0; b < 256; ++b) {
        tokens.push_back(bytes_to_gpt2_unicode(std::string(1, static_cast<char>(b))));
        types.push_back(1);
    }
    tokens.push_back("<|begin_of_text|>");
    tokens.push_back("<|end_of_text|>");
    types.push_back(3);
    types.push_back(3);
    g.set_str("tokenizer.ggml.model", "gpt2");
    g.set_str("tokenizer.ggml.pre", "llama-bpe");
    g.set_strs("tokenizer.ggml.tokens", tokens);
    g.set_i32s("tokenizer.ggml.token_type", types);
    g.set_strs("tokenizer.ggml.merges", {});
    g.set_u32("tokenizer.ggml.bos_token_id", 256);
    g.set_u32("tokenizer.ggml.eos_token_id", 257);
    int k = 0;
    auto add = [&](const std::string& name, std::vector<uint64_t> ne) {
        uint64_t n = 1;
        for (uint64_t d : ne) n *= d;
        const float base = static_cast<float>(k++);
        g.tensors.push_back({name, ne, 0, f32_data(n, [base](uint64_t i) { return base + float(i) / 1024.0f; }), {}});
    };
    add("token_embd.weight", {dim, vocab});
    add("blk.0.attn_norm.weight", {dim});
    add("blk.0.attn_q.weight", {dim, dim});
    add("blk.0.attn_k.weight", {dim, kv});
    add("blk.0.attn_v.weight", {dim, kv});
    add("blk.0.attn_output.weight", {dim, dim});
    add("blk.0.ffn_norm.weight", {dim});
    add("blk.0.ffn_gate.weight", {dim, hidden});
    add("blk.0.ffn_down.weight", {hidden, dim});
    add("blk.0.ffn_up.weight", {dim, hidden});
    add("output_norm.weight", {dim});
    return g;
}

}  // namespace strata::test
