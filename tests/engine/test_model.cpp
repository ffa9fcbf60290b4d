// Model: exact parameter counts, strata-cli info, and the demonstration model.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <sys/resource.h>

#include "catch.hpp"
#include "strata/demo.hpp"
#include "strata/error.hpp"
#include "strata/model.hpp"
#include "support.hpp"
#include "test_huggingface_fixture.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using Catch::Contains;
using namespace strata;
using namespace strata::test;
using namespace strata::test::hf;

namespace {

// Parameters implied by the arguments alone, counted from model.py's Transformer.__init__ by hand.
struct Expected {
    uint64_t embeddings, attention, feed_forward, norms, output, total;
};
Expected count_by_hand(int64_t dim, int64_t n_layers, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                       int64_t hidden, int64_t vocab, bool tied) {
    Expected e{};
    e.embeddings = uint64_t(vocab * dim);
    e.attention = uint64_t(n_layers) * uint64_t(dim * n_heads * head_dim        // wq
                                                + 2 * dim * n_kv_heads * head_dim  // wk, wv
                                                + n_heads * head_dim * dim);       // wo
    e.feed_forward = uint64_t(n_layers) * uint64_t(3 * dim * hidden);             // w1, w2, w3
    e.norms = uint64_t(n_layers) * uint64_t(2 * dim) + uint64_t(dim);             // attention_norm, ffn_norm; norm
    e.output = tied ? 0 : uint64_t(vocab * dim);
    e.total = e.embeddings + e.attention + e.feed_forward + e.norms + e.output;
    return e;
}

void check_counts(const Model& m, const Expected& e) {
    CHECK(m.parameter_count() == e.total);
    const auto g = m.parameter_groups();
    CHECK(g.at("tok_embeddings") == e.embeddings);
    CHECK(g.at("attention") == e.attention);
    CHECK(g.at("feed_forward") == e.feed_forward);
    CHECK(g.at("norms") == e.norms);
    CHECK(g.at("output") == e.output);
}

std::string run_cli(const std::string& args, int* status) {
    const fs::path cli = fs::path(STRATA_BINARY_DIR) / "app" / "strata-cli";
    REQUIRE(fs::exists(cli));
    FILE* p = ::popen((cli.string() + " " + args + " 2>&1").c_str(), "r");
    REQUIRE(p != nullptr);
    std::string out;
    char buf[4096];
    while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    *status = ::pclose(p);
    return out;
}

}  // namespace

TEST_CASE("parameter count of the golden model is exact (tied: embeddings counted once)", "[checkpoint]") {
    const auto m = load_model(golden_hf_dir());
    // expected.json: dim 128, 3 layers, 2:1 heads of 64, FFN 448, vocab 128256, tied.
    const json a = expected()["args"];
    const Expected e = count_by_hand(a["dim"], a["n_layers"], a["n_heads"], a["n_kv_heads"], a["head_dim"],
                                     a["hidden_dim"], a["vocab_size"], a["tie_embeddings"]);
    CHECK(e.total == 128256ull * 128 + 3 * (128 * 128 + 2 * 128 * 64 + 128 * 128 + 3 * 128 * 448 + 2 * 128) + 128);
    check_counts(*m, e);
}

TEST_CASE("parameter count of an untied model counts output separately", "[checkpoint]") {
    const auto m = load_model(write_tiny("count-untied"));
    check_counts(*m, count_by_hand(16, 2, 4, 2, 4, 24, 128256, false));
}

TEST_CASE("validate_shapes names the tensor, the expected and found shapes, and the file", "[checkpoint]") {
    auto m = load_model(golden_hf_dir());
    TensorView& w1 = m->tensors.at("layers.2.feed_forward.w1");
    w1.shape = {448, 127};
    const std::string e = error_of<ModelError>([&] { m->validate_shapes(); });
    CHECK_THAT(e, Contains("layers.2.feed_forward.w1") && Contains("expected [448, 128], found [448, 127] in") &&
                      Contains("model.safetensors"));
    w1.shape = {448, 128};
    m->tensors.erase("norm");
    CHECK_THAT(error_of<ModelError>([&] { m->validate_shapes(); }), Contains("missing tensor norm"));
    CHECK_THAT(error_of<ModelError>([&] { m->tensor("norm"); }), Contains("norm") && Contains(m->path.string()));
}

TEST_CASE("strata-cli info prints format, config, exact parameters, dtypes and bytes", "[checkpoint]") {
    int status = 0;
    const std::string out = run_cli("info --model " + golden_hf_dir().string(), &status);
    INFO(out);
    REQUIRE(status == 0);
    const json j = json::parse(out);
    const json a = expected()["args"];
    CHECK(j["format"] == "huggingface");
    CHECK(j["path"] == golden_hf_dir().string());
    CHECK(j["demo"] == false);
    CHECK(j["config"]["dim"] == a["dim"]);
    CHECK(j["config"]["n_layers"] == a["n_layers"]);
    CHECK(j["config"]["hidden_dim"] == a["hidden_dim"]);
    CHECK(j["config"]["tie_embeddings"] == true);
    CHECK(j["config"]["norm_eps"] == 1e-5);
    CHECK(j["config"]["rope_scaling"]["factor"] == 8.0);
    const Expected e = count_by_hand(a["dim"], a["n_layers"], a["n_heads"], a["n_kv_heads"], a["head_dim"],
                                     a["hidden_dim"], a["vocab_size"], a["tie_embeddings"]);
    CHECK(j["parameters"]["total"] == e.total);
    CHECK(j["parameters"]["groups"]["attention"] == e.attention);
    CHECK(j["parameters"]["groups"]["output"] == 0);
    CHECK(j["dtypes"] == json{{"BF16", 29}});
    CHECK(j["tensors"] == 29);
    CHECK(j["file_bytes"] == fs::file_size(reference_dir() / "model" / "model.safetensors"));

    const std::string bad = run_cli("info --model " + (temp_dir("info-none") / "x").string(), &status);
    CHECK(status != 0);
    CHECK_THAT(bad, Contains("error:") && Contains("no such file or folder"));
}

TEST_CASE("the random demonstration model: written, loaded, marked, and a genuine HF checkpoint", "[checkpoint]") {
    const fs::path dir = temp_dir("demo");
    const DemoOptions o{.random = true};
    make_demo_model(dir, tokenizer_json(), o);
    const auto m = load_model(dir);
    REQUIRE_NOTHROW(m->validate_shapes());
    const ModelConfig& c = m->config;
    CHECK(c.is_demo);
    CHECK(c.is_instruct);
    CHECK(c.dim == o.dim);
    CHECK(c.n_layers == o.n_layers);
    CHECK(c.n_heads == o.n_heads);
    CHECK(c.n_kv_heads == o.n_kv_heads);
    CHECK(c.hidden_dim == o.hidden_dim);
    CHECK(c.vocab_size == 128256);
    CHECK(c.tie_embeddings);
    CHECK(c.rope_scaling.enabled);
    CHECK(m->tokenizer.vocab_size() == 128256);
    for (const auto& [name, t] : m->tensors) CHECK(t.dtype == DType::BF16);
    check_counts(*m, count_by_hand(o.dim, o.n_layers, o.n_heads, o.n_kv_heads, o.dim / o.n_heads, o.hidden_dim,
                                   128256, true));
    CHECK(m->file_bytes() < 80u * 1000 * 1000);
    CHECK_THAT(read_file(dir / "README.txt"), Contains("RANDOM WEIGHTS"));

    // q/k are stored as HF's converter would have written them from Meta's layout.
    const TensorView& wq = m->tensor("layers.1.attention.wq");
    CHECK(hf_permute(wq.to_f32(), o.n_heads, wq.rows(), wq.cols()) ==
          read_raw(dir / "model.safetensors", "model.layers.1.self_attn.q_proj.weight"));
    const TensorView& wk = m->tensor("layers.3.attention.wk");
    CHECK(hf_permute(wk.to_f32(), o.n_kv_heads, wk.rows(), wk.cols()) ==
          read_raw(dir / "model.safetensors", "model.layers.3.self_attn.k_proj.weight"));

    // Scaled like a real initialisation: matrices std ~0.02, norm gains around 1.
    auto moments = [](const std::vector<float>& v) {
        double s = 0, s2 = 0;
        for (float x : v) s += x, s2 += double(x) * x;
        const double mean = s / double(v.size());
        return std::pair{mean, std::sqrt(s2 / double(v.size()) - mean * mean)};
    };
    auto [wm, ws] = moments(m->tensor("layers.0.feed_forward.w2").to_f32());
    CHECK(std::abs(wm) < 0.001);
    CHECK(ws == Approx(0.02).epsilon(0.02));
    auto [gm, gs] = moments(m->tensor("layers.2.ffn_norm").to_f32());
    CHECK(gm == Approx(1.0).epsilon(0.05));
    CHECK(gs > 0.05);
}

TEST_CASE("the random demonstration model is reproducible from its seed", "[checkpoint]") {
    DemoOptions o;
    o.random = true;
    o.dim = 32;
    o.n_layers = 1;
    o.n_heads = 4;
    o.n_kv_heads = 2;
    o.hidden_dim = 64;
    const fs::path a = temp_dir("demo-a"), b = temp_dir("demo-b"), c = temp_dir("demo-c");
    make_demo_model(a, tokenizer_json(), o);
    make_demo_model(b, tokenizer_json(), o);
    o.seed += 1;
    make_demo_model(c, tokenizer_json(), o);
    CHECK(read_file(a / "model.safetensors") == read_file(b / "model.safetensors"));
    CHECK(read_file(a / "model.safetensors") != read_file(c / "model.safetensors"));
    REQUIRE_NOTHROW(load_model(c)->validate_shapes());
}

TEST_CASE("the demonstration model refuses a missing tokenizer and impossible options", "[checkpoint]") {
    const fs::path dir = temp_dir("demo-bad");
    CHECK_THAT(error_of<TokenizerError>([&] { make_demo_model(dir, dir / "nope.json"); }), Contains("nope.json"));
    DemoOptions o;
    o.random = true;
    o.n_kv_heads = 3;
    CHECK_THROWS_AS(make_demo_model(dir, tokenizer_json(), o), InputError);
    CHECK_FALSE(fs::exists(dir / "model.safetensors"));
}

TEST_CASE("strata-cli make-demo writes a model that info calls a demonstration", "[checkpoint]") {
    const fs::path dir = temp_dir("demo-cli") / "demo";
    int status = 0;
    const std::string out = run_cli("make-demo --out " + dir.string() + " --tokenizer " + tokenizer_json().string(), &status);
    INFO(out);
    REQUIRE(status == 0);
    CHECK(json::parse(out)["demo"] == true);
    const json info = json::parse(run_cli("info --model " + dir.string(), &status));
    CHECK(status == 0);
    CHECK(info["demo"] == true);
    CHECK(info["config"]["is_demo"] == true);
    CHECK(info["config"]["demo_trained"] == true);

    const fs::path rnd = temp_dir("demo-cli") / "random";
    const json r = json::parse(run_cli("make-demo --random --seed 7 --out " + rnd.string() + " --tokenizer " +
                                       tokenizer_json().string(), &status));
    CHECK(status == 0);
    CHECK(r["trained"] == false);
    CHECK(r["seed"] == 7);
    CHECK(run_cli("make-demo --seed 7 --out " + rnd.string(), &status).find("--random") != std::string::npos);
    CHECK(status != 0);
}

// Hidden ([.rss]): run with `strata_engine_tests "[.rss]"`. Writes a sparse 2.5 GB checkpoint shaped like
// Llama 3.2 1B (bf16, tied), loads it with `strata-cli info` in a child process and reports the child's peak
// RSS. Weights are mapped and never touched at load, so the peak must stay far below the file size.
TEST_CASE("peak RSS of loading a 2.5 GB checkpoint stays small", "[.rss]") {
    const json c = {{"architectures", {"LlamaForCausalLM"}}, {"hidden_size", 2048}, {"intermediate_size", 8192},
                    {"num_hidden_layers", 16}, {"num_attention_heads", 32}, {"num_key_value_heads", 8},
                    {"head_dim", 64}, {"vocab_size", 128256}, {"tie_word_embeddings", true}};
    const fs::path dir = temp_dir("rss");
    write_file(dir / "config.json", c.dump());
    fs::create_symlink(tokenizer_json(), dir / "tokenizer.json");
    // The header only; the data is a hole in a sparse file (reads as zeros, takes no disk).
    json h = json::object();
    uint64_t off = 0;
    auto add = [&](const std::string& name, std::vector<int64_t> shape) {
        uint64_t n = 2;
        for (int64_t d : shape) n *= uint64_t(d);
        h[name] = {{"dtype", "BF16"}, {"shape", shape}, {"data_offsets", {off, off + n}}};
        off += n;
    };
    add("model.embed_tokens.weight", {128256, 2048});
    for (int l = 0; l < 16; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        add(p + "self_attn.q_proj.weight", {2048, 2048});
        add(p + "self_attn.k_proj.weight", {512, 2048});
        add(p + "self_attn.v_proj.weight", {512, 2048});
        add(p + "self_attn.o_proj.weight", {2048, 2048});
        add(p + "mlp.gate_proj.weight", {8192, 2048});
        add(p + "mlp.down_proj.weight", {2048, 8192});
        add(p + "mlp.up_proj.weight", {8192, 2048});
        add(p + "input_layernorm.weight", {2048});
        add(p + "post_attention_layernorm.weight", {2048});
    }
    add("model.norm.weight", {2048});
    const std::string head = safetensors_bytes(h.dump(), "");
    write_file(dir / "model.safetensors", head);
    fs::resize_file(dir / "model.safetensors", head.size() + off);
    REQUIRE(fs::file_size(dir / "model.safetensors") >= 2ull * 1000 * 1000 * 1000);

    const fs::path cli = fs::path(STRATA_BINARY_DIR) / "app" / "strata-cli";
    REQUIRE(std::system((cli.string() + " info --model " + dir.string() + " > " + (dir / "info.json").string()).c_str()) == 0);
    struct rusage ru {};
    ::getrusage(RUSAGE_CHILDREN, &ru);
    const json info = json::parse(read_file(dir / "info.json"));
    const double file_gb = double(fs::file_size(dir / "model.safetensors")) / 1e9;
    const double rss_mb = double(ru.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
    WARN("file " << file_gb << " GB, " << info["parameters"]["total"].get<uint64_t>()
                 << " parameters; peak RSS of strata-cli info: " << rss_mb << " MiB");
    CHECK(info["parameters"]["total"] == 1235814400ull);
    CHECK(rss_mb < 300.0);
}

TEST_CASE("meta_hidden_dim gives the FFN sizes of the published Llama 3 models", "[checkpoint]") {
    // (dim, multiple_of, ffn_dim_multiplier) from Meta's params.json -> intermediate_size in the HF configs.
    CHECK(meta_hidden_dim(4096, 1024, 1.3) == 14336);   // 3 / 3.1 8B
    CHECK(meta_hidden_dim(8192, 4096, 1.3) == 28672);   // 70B
    CHECK(meta_hidden_dim(16384, 4096, 1.2) == 53248);  // 3.1 405B
    CHECK(meta_hidden_dim(2048, 256, 1.5) == 8192);     // 3.2 1B
    CHECK(meta_hidden_dim(3072, 256, 1.0) == 8192);     // 3.2 3B
    CHECK(meta_hidden_dim(128, 64, 0.0) == 384);        // no multiplier: int(2*512/3) = 341, up to 384
}

TEST_CASE("ModelConfig::validate refuses numbers that cannot be a Llama model", "[checkpoint]") {
    auto good = [] {
        ModelConfig c;
        c.dim = 64, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 16, c.hidden_dim = 128;
        c.vocab_size = 1000, c.bos_id = 1, c.eos_ids = {2};
        return c;
    };
    REQUIRE_NOTHROW(good().validate());
    auto fails = [&](auto edit, const std::string& what) {
        ModelConfig c = good();
        edit(c);
        CHECK_THAT(error_of<ModelError>([&] { c.validate(); }), Contains(what));
    };
    fails([](ModelConfig& c) { c.dim = 0; }, "dim = 0");
    fails([](ModelConfig& c) { c.n_kv_heads = 3; }, "not a multiple of n_kv_heads 3");
    fails([](ModelConfig& c) { c.n_kv_heads = 8; }, "n_kv_heads = 8");
    fails([](ModelConfig& c) { c.head_dim = 15; }, "head_dim 15 is odd");
    fails([](ModelConfig& c) { c.vocab_size = -5; }, "vocab_size = -5");
    fails([](ModelConfig& c) { c.norm_eps = 0.0f; }, "norm_eps");
    fails([](ModelConfig& c) { c.eos_ids = {1000}; }, "eos id 1000 is outside the vocabulary of 1000");
    fails([](ModelConfig& c) { c.bos_id = -1; }, "bos id -1");
    fails([](ModelConfig& c) {
        c.rope_scaling.enabled = true;
        c.rope_scaling.high_freq_factor = 0.5f;
    }, "rope_scaling");
}

TEST_CASE("ModelConfig as JSON: every field under a stable name", "[checkpoint]") {
    const auto m = load_model(golden_hf_dir());
    const json j = m->config;
    for (const char* k : {"name", "dim", "n_layers", "n_heads", "n_kv_heads", "head_dim", "hidden_dim", "vocab_size",
                          "norm_eps", "rope_theta", "rope_scaling", "tie_embeddings", "max_seq_len", "bos_id",
                          "eos_ids", "is_demo", "is_instruct"})
        CHECK(j.contains(k));
    CHECK(j["norm_eps"] == 1e-5);  // written as the decimal in config.json, not float noise
    CHECK(j["rope_theta"] == 500000.0);
    CHECK(j["rope_scaling"]["original_max_position_embeddings"] == 8192);
    CHECK(j["eos_ids"] == json{128001});
}
