// The three checkpoint formats against each other: the golden Hugging Face model is written as GGUF and as a Meta
// folder, and all of them must load to the same config and bit-identical canonical tensors, with tokenizers that
// give the reference ids.
//
// Format-specific config fields (not compared across formats, or compared differently):
//   name          the folder or file name
//   rope_scaling  GGUF stores Llama 3.1 scaling as rope_freqs.weight factors: a GGUF model has
//                 rope_scaling.enabled == false and rope_freqs_factors instead (checked against apply_scaling below)
#include <cmath>
#include <cstring>
#include <numbers>

#include "catch.hpp"
#include "support.hpp"

#include "strata/backend.hpp"
#include "strata/error.hpp"
#include "strata/gguf.hpp"
#include "strata/model.hpp"
#include "strata/npy.hpp"
#include "strata/transformer.hpp"
#include "strata/writers.hpp"

namespace fs = std::filesystem;
using namespace strata;

namespace {

const Model& hf_model() {
    static std::unique_ptr<Model> m = load_huggingface(test::golden_hf_dir(), {});
    return *m;
}

const fs::path& gguf_path() {
    static fs::path p = [] {
        fs::path out = test::temp_dir("formats-gguf") / "golden.gguf";
        write_gguf(hf_model(), out);
        return out;
    }();
    return p;
}

const fs::path& meta_dir() {
    static fs::path p = [] {
        fs::path out = test::temp_dir("formats-meta") / "golden-meta";
        write_meta(hf_model(), out);
        return out;
    }();
    return p;
}

void require_same_config(const ModelConfig& a, const ModelConfig& b, bool compare_rope_scaling) {
    CHECK(a.dim == b.dim);
    CHECK(a.n_layers == b.n_layers);
    CHECK(a.n_heads == b.n_heads);
    CHECK(a.n_kv_heads == b.n_kv_heads);
    CHECK(a.head_dim == b.head_dim);
    CHECK(a.hidden_dim == b.hidden_dim);
    CHECK(a.vocab_size == b.vocab_size);
    CHECK(a.norm_eps == b.norm_eps);
    CHECK(a.rope_theta == b.rope_theta);
    CHECK(a.tie_embeddings == b.tie_embeddings);
    CHECK(a.max_seq_len == b.max_seq_len);
    CHECK(a.bos_id == b.bos_id);
    CHECK(a.eos_ids == b.eos_ids);
    CHECK(a.is_demo == b.is_demo);
    CHECK(a.is_instruct == b.is_instruct);
    if (compare_rope_scaling) {
        CHECK(a.rope_scaling.enabled == b.rope_scaling.enabled);
        CHECK(a.rope_scaling.factor == b.rope_scaling.factor);
        CHECK(a.rope_scaling.low_freq_factor == b.rope_scaling.low_freq_factor);
        CHECK(a.rope_scaling.high_freq_factor == b.rope_scaling.high_freq_factor);
        CHECK(a.rope_scaling.original_max_position_embeddings == b.rope_scaling.original_max_position_embeddings);
    }
}

// Every canonical tensor: same dtype and shape, and the bytes of every canonical row equal.
void require_same_tensors(const Model& a, const Model& b) {
    REQUIRE(a.tensors.size() == b.tensors.size());
    for (const auto& [name, ta] : a.tensors) {
        INFO("tensor " << name);
        REQUIRE(b.has(name));
        const TensorView& tb = b.tensor(name);
        REQUIRE(ta.dtype == tb.dtype);
        REQUIRE(ta.shape == tb.shape);
        REQUIRE(ta.row_bytes() == tb.row_bytes());
        const int64_t rows = ta.shape.size() < 2 ? 1 : ta.rows();
        int64_t differing = 0;
        for (int64_t r = 0; r < rows; ++r)
            differing += std::memcmp(ta.row_ptr(r), tb.row_ptr(r), ta.row_bytes()) != 0;
        CHECK(differing == 0);
    }
}

// Meta's apply_scaling (llama-models), written out here independently of the writer: the scaled frequency of pair i.
double scaled_frequency(const ModelConfig& c, int64_t i) {
    const double freq = 1.0 / std::pow(double(c.rope_theta), double(2 * i) / double(c.head_dim));
    const double factor = c.rope_scaling.factor, low = c.rope_scaling.low_freq_factor,
                 high = c.rope_scaling.high_freq_factor;
    const double old_len = double(c.rope_scaling.original_max_position_embeddings);
    const double wavelen = 2 * std::numbers::pi / freq;
    if (wavelen < old_len / high) return freq;
    if (wavelen > old_len / low) return freq / factor;
    const double smooth = (old_len / wavelen - low) / (high - low);
    return (1 - smooth) * freq / factor + smooth * freq;
}

void require_reference_ids(const Tokenizer& tok, const char* label) {
    const auto cases = nlohmann::json::parse(test::read_file(test::reference_dir() / "tokenizer_cases.json"));
    int checked = 0;
    for (const auto& c : cases["cases"]) {
        INFO(label << " case " << c["name"].get<std::string>());
        const std::string text = c["text"];
        const bool special = c.contains("ids_plain");
        CHECK(tok.encode(text, special) == c["ids"].get<std::vector<int32_t>>());
        if (special) CHECK(tok.encode(text, false) == c["ids_plain"].get<std::vector<int32_t>>());
        ++checked;
    }
    CHECK(checked > 40);
}

}  // namespace

TEST_CASE("golden model written as GGUF: same config, bit-identical canonical tensors", "[formats][gguf]") {
    const Model& hf = hf_model();
    const auto g = load_gguf(gguf_path(), {});
    CHECK(g->format == CheckpointFormat::GGUF);
    require_same_config(hf.config, g->config, false);
    require_same_tensors(hf, *g);
    // The golden model is tied (Llama 3.2 style): no output.weight in the file, tied again on load.
    CHECK(g->config.tie_embeddings);
    CHECK_FALSE(g->has("output"));
    // GGUF rows are Meta's layout as stored: the writer really undid Hugging Face's q/k permutation.
    const TensorView& wq_hf = hf.tensor("layers.0.attention.wq");
    const TensorView& wq_g = g->tensor("layers.0.attention.wq");
    CHECK(wq_hf.rope_heads == hf.config.n_heads);
    CHECK(wq_g.rope_heads == 0);
    CHECK(std::memcmp(wq_hf.data, wq_g.data, wq_hf.nbytes) != 0);
}

TEST_CASE("GGUF rope_freqs factors reproduce Meta's apply_scaling", "[formats][gguf]") {
    const Model& hf = hf_model();
    REQUIRE(hf.config.rope_scaling.enabled);
    const auto g = load_gguf(gguf_path(), {});
    CHECK_FALSE(g->config.rope_scaling.enabled);  // the factors replace it
    REQUIRE(g->rope_freqs_factors.size() == size_t(hf.config.head_dim / 2));
    int scaled = 0;
    for (int64_t i = 0; i < hf.config.head_dim / 2; ++i) {
        const double base = 1.0 / std::pow(double(hf.config.rope_theta), double(2 * i) / double(hf.config.head_dim));
        const double via_factors = base / g->rope_freqs_factors[size_t(i)];
        const double expected = scaled_frequency(hf.config, i);
        INFO("pair " << i);
        CHECK(std::abs(via_factors - expected) <= 1e-6 * expected);
        scaled += g->rope_freqs_factors[size_t(i)] != 1.0f;
    }
    CHECK(scaled > 0);  // the test model's frequencies do reach the scaled range
}

TEST_CASE("written GGUF carries llama.cpp's metadata and tokenizer", "[formats][gguf]") {
    const MappedFile f(gguf_path());
    const gguf::File g = gguf::parse(f.bytes(), gguf_path().string());
    CHECK(g.version == 3);
    auto str = [&](const char* k) { return g.find(k) ? g.find(k)->str : std::string("(missing)"); };
    auto num = [&](const char* k) { return g.find(k) ? g.find(k)->u : 0; };
    CHECK(str("general.architecture") == "llama");
    CHECK(str("tokenizer.ggml.model") == "gpt2");
    CHECK(str("tokenizer.ggml.pre") == "llama-bpe");
    CHECK(num("llama.embedding_length") == 128);
    CHECK(num("llama.block_count") == 3);
    CHECK(num("llama.attention.head_count") == 2);
    CHECK(num("llama.attention.head_count_kv") == 1);
    CHECK(num("llama.feed_forward_length") == 448);
    CHECK(num("llama.context_length") == 131072);
    CHECK(num("general.file_type") == 32);  // LLAMA_FTYPE_MOSTLY_BF16
    REQUIRE(g.find("tokenizer.ggml.tokens"));
    CHECK(g.find("tokenizer.ggml.tokens")->strings.size() == 128256);
    CHECK(g.find("tokenizer.ggml.tokens")->strings[128000] == "<|begin_of_text|>");
    CHECK(g.find("tokenizer.ggml.token_type")->ints[128000] == 3);
    CHECK(g.find("tokenizer.ggml.token_type")->ints[0] == 1);
    CHECK(num("tokenizer.ggml.bos_token_id") == 128000);
    CHECK(num("tokenizer.ggml.eos_token_id") == 128001);
    // One tensor per weight plus rope_freqs; ggml order of dims is the reverse of torch's.
    CHECK(g.tensors.size() == 1 + 1 + 3 * 9 + 1);
    const gguf::TensorInfo* emb = g.find_tensor("token_embd.weight");
    REQUIRE(emb);
    CHECK(emb->ne == std::vector<uint64_t>{128, 128256});
    CHECK(emb->type == 30);  // GGML_TYPE_BF16
    for (const gguf::TensorInfo& t : g.tensors) CHECK(t.file_offset % 32 == 0);
}

TEST_CASE("merges derived from the ranks are tokenizer.json's merges, in order", "[formats][gguf]") {
    // tokenizer.json was made by Hugging Face's converter from Meta's ranks; bpe_merges is our own derivation.
    const auto j = nlohmann::json::parse(test::read_file(test::tokenizer_json()));
    const auto& expected = j["model"]["merges"];
    const auto merges = bpe_merges(hf_model().tokenizer);
    REQUIRE(merges.size() == expected.size());
    size_t mismatches = 0;
    for (size_t i = 0; i < merges.size(); ++i) {
        const std::string got = bytes_to_gpt2_unicode(merges[i].first) + " " + bytes_to_gpt2_unicode(merges[i].second);
        const std::string want = expected[i].is_string() ? expected[i].get<std::string>()
                                                         : expected[i][0].get<std::string>() + " " +
                                                               expected[i][1].get<std::string>();
        if (got != want && mismatches++ < 5) WARN("merge " << i << ": " << got << " vs " << want);
    }
    CHECK(mismatches == 0);
}

TEST_CASE("golden model written as a Meta folder: same config, bit-identical canonical tensors", "[formats][meta]") {
    const Model& hf = hf_model();
    const auto m = load_meta(meta_dir(), {});
    CHECK(m->format == CheckpointFormat::Meta);
    require_same_config(hf.config, m->config, true);
    require_same_tensors(hf, *m);
    CHECK(m->config.tie_embeddings);
    const TensorView& wk_hf = hf.tensor("layers.1.attention.wk");
    const TensorView& wk_m = m->tensor("layers.1.attention.wk");
    CHECK(wk_m.rope_heads == 0);
    CHECK(std::memcmp(wk_hf.data, wk_m.data, wk_hf.nbytes) != 0);
    // Weights are views into the mapped .pth, 64-byte aligned as torch.save places them.
    CHECK(wk_m.file == (meta_dir() / "consolidated.00.pth").string());
    CHECK(wk_m.file_offset % 64 == 0);
}

TEST_CASE("params.json written for the golden model follows Meta's ModelArgs", "[formats][meta]") {
    const auto p = nlohmann::json::parse(test::read_file(meta_dir() / "params.json"));
    CHECK(p["dim"] == 128);
    CHECK(p["n_layers"] == 3);
    CHECK(p["n_heads"] == 2);
    CHECK(p["n_kv_heads"] == 1);
    CHECK(p["vocab_size"] == 128256);
    CHECK(p["use_scaled_rope"] == true);
    CHECK(p["norm_eps"].get<double>() == 1e-5);
    CHECK(p["rope_theta"].get<double>() == 500000.0);
    // Meta's FFN rule, recomputed here from the written numbers: int(2*4*dim/3), times the multiplier, rounded up.
    int64_t hidden = int64_t(2.0 * 4 * 128 / 3.0);
    if (p.contains("ffn_dim_multiplier")) hidden = int64_t(p["ffn_dim_multiplier"].get<double>() * double(hidden));
    const int64_t m = p["multiple_of"];
    CHECK(m * ((hidden + m - 1) / m) == 448);
    // tokenizer.model: 128000 ranks, one "base64 rank" line each, specials not listed (Meta's code adds them).
    const std::string ranks = test::read_file(meta_dir() / "tokenizer.model");
    CHECK(std::count(ranks.begin(), ranks.end(), '\n') == 128000);
    CHECK(ranks.rfind("IQ== 0\n", 0) == 0);  // rank 0 is "!"
}

TEST_CASE("GGUF -> Meta -> GGUF chains keep every tensor and recover Llama 3.1 scaling", "[formats][gguf][meta]") {
    const Model& hf = hf_model();
    const auto g = load_gguf(gguf_path(), {});
    const fs::path dir = test::temp_dir("formats-chain") / "from-gguf";
    write_meta(*g, dir);
    const auto m = load_meta(dir, {});
    require_same_config(hf.config, m->config, true);  // params.json says use_scaled_rope again
    require_same_tensors(hf, *m);
    const fs::path again = test::temp_dir("formats-chain") / "again.gguf";
    write_gguf(*m, again);
    const auto g2 = load_gguf(again, {});
    require_same_config(g->config, g2->config, true);
    CHECK(g2->rope_freqs_factors == g->rope_freqs_factors);
    require_same_tensors(*g, *g2);
}

TEST_CASE("tokenizers from tokenizer.json, tokenizer.model and GGUF give the reference ids", "[formats][gguf][meta]") {
    require_reference_ids(hf_model().tokenizer, "tokenizer.json");
    require_reference_ids(load_gguf(gguf_path(), {})->tokenizer, "GGUF");
    require_reference_ids(load_meta(meta_dir(), {})->tokenizer, "tokenizer.model");
}

TEST_CASE("load_model detects the written formats", "[formats]") {
    CHECK(load_model(gguf_path())->format == CheckpointFormat::GGUF);
    CHECK(load_model(meta_dir())->format == CheckpointFormat::Meta);
}

TEST_CASE("the three formats run to the same logits on the CPU backend (long prompt, scaled RoPE)", "[formats]") {
    // The long prompt (614 tokens) is where Llama 3.1 scaling matters: GGUF's rope_freqs factors must give what
    // apply_scaling gives. Tensors are bit-identical, so the formats may differ only by the factors' float rounding.
    const auto tokens = test::expected()["prompts"]["long"]["tokens"].get<std::vector<int32_t>>();
    auto last_logits = [&](const Model& m) {
        auto backend = make_backend(BackendOptions{});
        backend->load(m);
        Transformer t(m, *backend);
        KVCache cache(*backend, m.config, static_cast<int64_t>(tokens.size()));
        TraceRequest req;
        req.top_k = 0;
        return t.prefill(cache, tokens, req).last_logits;
    };
    const auto hf = last_logits(hf_model());
    const auto g = last_logits(*load_gguf(gguf_path(), {}));
    const auto m = last_logits(*load_meta(meta_dir(), {}));
    const double gguf_vs_hf = test::rel_l2(g, hf), meta_vs_hf = test::rel_l2(m, hf);
    INFO("gguf vs hf " << gguf_vs_hf << ", meta vs hf " << meta_vs_hf);
    CHECK(meta_vs_hf == 0.0);  // same bytes, same config: the same computation
    CHECK(gguf_vs_hf < 1e-5);
    // Both against the independent reference's last row, within its tolerance.
    const NpyArray ref = read_npy(test::reference_dir() / "long" / "logits_tail.npy");
    const int64_t vocab = ref.shape.back();
    const std::vector<float> ref_last(ref.data.end() - vocab, ref.data.end());
    const auto rows = test::expected()["prompts"]["long"]["logits_rows"];
    REQUIRE(rows.back().get<size_t>() == tokens.size() - 1);
    CHECK(test::rel_l2(g, ref_last) < 5e-3);
    CHECK(test::rel_l2(m, ref_last) < 5e-3);
}
