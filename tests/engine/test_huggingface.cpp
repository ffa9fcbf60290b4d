// Hugging Face checkpoints: the golden model, name mapping, undoing the q/k permutation, shards, config.json.
#include <array>
#include <atomic>
#include <cstring>
#include <fstream>

#include "catch.hpp"
#include "strata/error.hpp"
#include "strata/model.hpp"
#include "support.hpp"
#include "test_huggingface_fixture.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace strata;
using namespace strata::test;
using namespace strata::test::hf;

namespace {

std::string canonical_of(const std::string& hf) {
    if (hf == "model.embed_tokens.weight") return "tok_embeddings";
    if (hf == "model.norm.weight") return "norm";
    if (hf == "lm_head.weight") return "output";
    const auto dot = hf.find('.', 13);
    const std::string layer = "layers." + hf.substr(13, dot - 13) + ".", rest = hf.substr(dot + 1);
    const std::map<std::string, std::string> m = {
        {"self_attn.q_proj.weight", "attention.wq"},    {"self_attn.k_proj.weight", "attention.wk"},
        {"self_attn.v_proj.weight", "attention.wv"},    {"self_attn.o_proj.weight", "attention.wo"},
        {"mlp.gate_proj.weight", "feed_forward.w1"},    {"mlp.down_proj.weight", "feed_forward.w2"},
        {"mlp.up_proj.weight", "feed_forward.w3"},      {"input_layernorm.weight", "attention_norm"},
        {"post_attention_layernorm.weight", "ffn_norm"}};
    return layer + m.at(rest);
}

}  // namespace

TEST_CASE("the golden Hugging Face model loads with the reference arguments", "[checkpoint]") {
    const auto m = load_model(golden_hf_dir());
    const json args = expected()["args"];
    const ModelConfig& c = m->config;
    CHECK(m->format == CheckpointFormat::HuggingFace);
    CHECK(c.dim == args["dim"]);
    CHECK(c.n_layers == args["n_layers"]);
    CHECK(c.n_heads == args["n_heads"]);
    CHECK(c.n_kv_heads == args["n_kv_heads"]);
    CHECK(c.head_dim == args["head_dim"]);
    CHECK(c.hidden_dim == args["hidden_dim"]);
    CHECK(c.vocab_size == args["vocab_size"]);
    CHECK(c.norm_eps == float(args["norm_eps"].get<double>()));
    CHECK(c.rope_theta == float(args["rope_theta"].get<double>()));
    CHECK(c.rope_scaling.enabled == args["use_scaled_rope"].get<bool>());
    CHECK(c.rope_scaling.factor == float(args["rope_scale_factor"].get<double>()));
    CHECK(c.rope_scaling.low_freq_factor == 1.0f);
    CHECK(c.rope_scaling.high_freq_factor == 4.0f);
    CHECK(c.rope_scaling.original_max_position_embeddings == 8192);
    CHECK(c.tie_embeddings == args["tie_embeddings"].get<bool>());
    CHECK(c.max_seq_len == 131072);
    CHECK(c.bos_id == 128000);
    CHECK(c.eos_ids == std::vector<int32_t>{128001});
    CHECK_FALSE(c.is_demo);
    CHECK_FALSE(c.is_instruct);
    // Tied: no `output`; logits use the embedding table.
    CHECK_FALSE(m->has("output"));
    CHECK(&m->output_weight() == &m->tensor("tok_embeddings"));
    CHECK(m->tensors.size() == size_t(1 + 9 * c.n_layers + 1));
    CHECK(m->tokenizer.vocab_size() == 128256);
    CHECK(m->tensor("layers.1.attention.wq").source_name == "model.layers.1.self_attn.q_proj.weight");
    CHECK(m->tensor("layers.1.attention.wq").rope_heads == 2);
    CHECK(m->tensor("layers.1.attention.wk").rope_heads == 1);
    CHECK(m->tensor("layers.1.attention.wv").rope_heads == 0);
    CHECK(m->tensor("layers.2.feed_forward.w2").shape == std::vector<int64_t>{128, 448});
    CHECK(m->file_bytes() == fs::file_size(reference_dir() / "model" / "model.safetensors"));
    REQUIRE_NOTHROW(m->validate_shapes());
}

TEST_CASE("golden wq/wk: canonical rows are the HF rows that HF's permute() made from them", "[checkpoint]") {
    const auto m = load_model(golden_hf_dir());
    const fs::path file = reference_dir() / "model" / "model.safetensors";
    for (int64_t l = 0; l < m->config.n_layers; ++l) {
        for (auto [proj, canon, heads] : {std::tuple{"q_proj", "attention.wq", m->config.n_heads},
                                          std::tuple{"k_proj", "attention.wk", m->config.n_kv_heads}}) {
            INFO("layer " << l << " " << proj);
            const TensorView& t = m->tensor(names::layer(l, canon));
            const std::vector<float> hf = read_raw(file, "model.layers." + std::to_string(l) + ".self_attn." + proj + ".weight");
            const std::vector<float> canonical = t.to_f32();
            // Applying the converter's permute to our canonical (Meta) tensor must give back the file's tensor.
            CHECK(hf_permute(canonical, heads, t.rows(), t.cols()) == hf);
            // And row by row: canonical row r is the stored row physical_row(r), read in place.
            for (int64_t r = 0; r < t.rows(); ++r)
                REQUIRE(std::memcmp(t.row_ptr(r), t.data + t.physical_row(r) * t.row_bytes(), t.row_bytes()) == 0);
            // The permutation is not the identity here (else this test could not fail).
            CHECK(canonical != hf);
        }
    }
}

TEST_CASE("physical_row undoes HF's permute on a small hand-made tensor", "[checkpoint]") {
    // 2 heads of head_dim 6, one column holding the Meta row index. By hand: HF's permute puts, per head, the
    // even Meta rows first (pair i, half 0) then the odd ones: HF rows hold Meta rows 0 2 4 1 3 5 | 6 8 10 7 9 11.
    const std::vector<float> stored = {0, 2, 4, 1, 3, 5, 6, 8, 10, 7, 9, 11};
    std::vector<float> meta(12);
    for (int i = 0; i < 12; ++i) meta[static_cast<size_t>(i)] = float(i);
    REQUIRE(hf_permute(meta, 2, 12, 1) == stored);

    TensorView t;
    t.name = "layers.0.attention.wq";
    t.dtype = DType::F32;
    t.shape = {12, 1};
    t.data = reinterpret_cast<const std::byte*>(stored.data());
    t.nbytes = 48;
    t.rope_heads = 2;
    CHECK(t.to_f32() == meta);
    const std::vector<int64_t> phys = {0, 3, 1, 4, 2, 5, 6, 9, 7, 10, 8, 11};
    for (int64_t r = 0; r < 12; ++r) CHECK(t.physical_row(r) == phys[static_cast<size_t>(r)]);
    t.rope_heads = 0;  // no permutation: rows as stored
    CHECK(t.to_f32() == stored);
}

TEST_CASE("a hand-made HF checkpoint maps every tensor, dtype and value to its canonical name", "[checkpoint]") {
    const json config = tiny_config();
    const auto tensors = tiny_tensors(config);
    const fs::path dir = write_tiny("tiny-values", config);
    const auto m = load_model(dir);
    CHECK(m->tensors.size() == tensors.size());
    CHECK(m->config.n_kv_heads == 2);
    CHECK_FALSE(m->config.rope_scaling.enabled);
    for (const StTensor& s : tensors) {
        INFO(s.name);
        const TensorView& t = m->tensor(canonical_of(s.name));
        CHECK(t.source_name == s.name);
        CHECK(t.shape == s.shape);
        CHECK(dtype_name(t.dtype) == s.dtype);
        CHECK(t.file == (dir / "model.safetensors").string());
        CHECK(std::memcmp(read_file(dir / "model.safetensors").data() + t.file_offset, s.bytes.data(), 16) == 0);
        const bool rope = s.name.find("q_proj") != std::string::npos || s.name.find("k_proj") != std::string::npos;
        const int64_t heads = s.name.find("q_proj") != std::string::npos ? 4 : 2;
        if (rope)
            CHECK(hf_permute(t.to_f32(), heads, t.rows(), t.cols()) == s.values);
        else
            CHECK(t.to_f32() == s.values);
    }
}

TEST_CASE("a sharded HF checkpoint (index.json) loads the same tensors as one file", "[checkpoint]") {
    const json config = tiny_config();
    const auto tensors = tiny_tensors(config);
    const fs::path dir = temp_dir("sharded");
    write_file(dir / "config.json", config.dump());
    fs::create_symlink(tokenizer_json(), dir / "tokenizer.json");
    // Layer 0 and the embeddings in shard 1, the rest in shard 2.
    std::vector<StTensor> a, b;
    for (const auto& t : tensors)
        (t.name.find("layers.1.") != std::string::npos || t.name == "model.norm.weight" || t.name == "lm_head.weight" ? b : a)
            .push_back(t);
    json weight_map;
    for (auto [shard, part] : {std::pair{"model-00001-of-00002.safetensors", &a}, {"model-00002-of-00002.safetensors", &b}}) {
        auto [h, data] = layout(*part);
        write_file(dir / shard, safetensors_bytes(h.dump(), data));
        for (const auto& t : *part) weight_map[t.name] = shard;
    }
    write_file(dir / "model.safetensors.index.json", json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump());

    const auto sharded = load_model(dir);
    const auto single = load_model(write_tiny("single", config));
    CHECK(sharded->files.size() == 2);
    REQUIRE(sharded->tensors.size() == single->tensors.size());
    for (const auto& [name, t] : single->tensors) {
        INFO(name);
        CHECK(sharded->tensor(name).to_f32() == t.to_f32());
    }
    CHECK(sharded->tensor("norm").file == (dir / "model-00002-of-00002.safetensors").string());
    CHECK(sharded->tensor("tok_embeddings").file == (dir / "model-00001-of-00002.safetensors").string());
}

TEST_CASE("config.json: defaults, eos lists, instruct detection, tied copies", "[checkpoint]") {
    SECTION("num_key_value_heads and head_dim default from the heads") {
        json c = tiny_config();
        c.erase("head_dim");
        c.erase("num_key_value_heads");
        c["num_attention_heads"] = 2;  // head_dim 8, 2 KV heads
        const auto m = load_model(write_tiny("defaults", c));
        CHECK(m->config.head_dim == 8);
        CHECK(m->config.n_kv_heads == 2);
        CHECK(m->tensor("layers.0.attention.wk").rope_heads == 2);
    }
    SECTION("eos from config.json and generation_config.json; 128009 means instruct") {
        json c = tiny_config();
        const fs::path dir = write_tiny("instruct", c);
        write_file(dir / "generation_config.json", json{{"eos_token_id", {128001, 128008, 128009}}}.dump());
        const auto m = load_model(dir);
        CHECK(m->config.eos_ids == std::vector<int32_t>{128001, 128008, 128009});
        CHECK(m->config.is_instruct);
    }
    SECTION("a base model is not instruct") {
        const auto m = load_model(write_tiny("base", tiny_config()));
        CHECK(m->config.eos_ids == std::vector<int32_t>{128001});
        CHECK_FALSE(m->config.is_instruct);
    }
    SECTION("Llama 3.1 rope_scaling is read") {
        json c = tiny_config();
        c["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 32.0}, {"low_freq_factor", 1.0},
                             {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
        const auto m = load_model(write_tiny("rope", c));
        CHECK(m->config.rope_scaling.enabled);
        CHECK(m->config.rope_scaling.factor == 32.0f);
    }
    SECTION("tied embeddings: an lm_head copy in the file is not used") {
        json c = tiny_config();
        auto ts = tiny_tensors(c);  // untied: has lm_head
        c["tie_word_embeddings"] = true;
        auto [h, data] = layout(ts);
        const auto m = load_model(write_folder("tied-copy", c, safetensors_bytes(h.dump(), data)));
        CHECK_FALSE(m->has("output"));
        CHECK(m->output_weight().name == "tok_embeddings");
    }
    SECTION("rotary_emb.inv_freq from older exports is skipped") {
        json c = tiny_config();
        auto ts = tiny_tensors(c);
        ts.push_back(make_tensor("model.layers.0.self_attn.rotary_emb.inv_freq", "F32", {2}, 99));
        auto [h, data] = layout(ts);
        const auto m = load_model(write_folder("inv-freq", c, safetensors_bytes(h.dump(), data)));
        CHECK(m->tensors.size() == ts.size() - 1);
    }
}

TEST_CASE("loading reports progress per shard and stops when cancelled", "[checkpoint]") {
    const fs::path dir = write_tiny("progress");
    std::vector<std::array<uint64_t, 4>> calls;
    LoadProgress p;
    p.on_progress = [&](uint64_t done, uint64_t total, int64_t td, int64_t tt) {
        calls.push_back({done, total, uint64_t(td), uint64_t(tt)});
    };
    load_model(dir, p);
    REQUIRE(calls.size() == 1);
    const uint64_t size = fs::file_size(dir / "model.safetensors");
    CHECK(calls[0] == std::array<uint64_t, 4>{size, size, 21, 21});

    std::atomic<bool> cancel{true};
    p.cancel = &cancel;
    CHECK_THROWS_AS(load_model(dir, p), Cancelled);
}
