// The forward pass beyond the golden numbers: prefill and decode agree, traces are named and shaped as
// trace.hpp says, the KV cache truncates, and bad requests or weights become typed errors.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>

#include "catch.hpp"
#include "strata/backend.hpp"
#include "strata/demo.hpp"
#include "strata/error.hpp"
#include "strata/model.hpp"
#include "strata/transformer.hpp"
#include "support.hpp"

using namespace strata;
namespace fs = std::filesystem;

namespace {

struct Loaded {
    std::unique_ptr<Model> model;
    std::unique_ptr<Backend> backend;
    explicit Loaded(const fs::path& dir) {
        model = load_model(dir);
        backend = make_backend(BackendOptions{});
        backend->load(*model);
    }
};

Loaded& golden() {
    static Loaded g(test::golden_hf_dir());
    return g;
}

std::vector<int32_t> short_prompt() {
    return test::expected()["prompts"]["short"]["tokens"].get<std::vector<int32_t>>();
}

std::vector<float> row(const TracedTensor& t, int64_t r) {
    return std::vector<float>(t.data.begin() + r * t.cols, t.data.begin() + (r + 1) * t.cols);
}

// A small demonstration model written once per process.
const fs::path& tiny_demo() {
    static fs::path dir = [] {
        fs::path d = test::temp_dir("tiny-demo");
        DemoOptions o;
        o.random = true;
        o.dim = 64;
        o.n_layers = 2;
        o.n_heads = 4;
        o.n_kv_heads = 2;
        o.hidden_dim = 96;
        make_demo_model(d, test::tokenizer_json(), o);
        return d;
    }();
    return dir;
}

}  // namespace

TEST_CASE("prefill and token-by-token decode give the same logits and residuals", "[forward]") {
    Loaded& g = golden();
    const auto tokens = short_prompt();
    Transformer tf(*g.model, *g.backend);
    KVCache all(*g.backend, g.model->config, 32), one(*g.backend, g.model->config, 32);
    TraceRequest req;
    req.logits_all_positions = true;
    req.keep_logits = true;
    const Trace pre = tf.prefill(all, tokens, req);
    const TracedTensor& logits = *pre.find("logits");
    for (size_t p = 0; p < tokens.size(); ++p) {
        const Trace d = tf.decode(one, tokens[p], req);
        CHECK(d.pos0 == int64_t(p));
        INFO("position " << p);
        CHECK(test::rel_l2(d.last_logits, row(logits, int64_t(p))) < 1e-5);
        CHECK(test::rel_l2(d.find("h.2")->data, row(*pre.find("h.2"), int64_t(p))) < 1e-5);
    }
    CHECK(one.size() == all.size());
}

TEST_CASE("a trace keeps what the request asks for, named and shaped as trace.hpp says", "[forward]") {
    Loaded& g = golden();
    const ModelConfig& c = g.model->config;
    const std::vector<int32_t> tokens{128000, 9906, 1917};
    const int64_t T = 3;
    Transformer tf(*g.model, *g.backend);

    KVCache cache(*g.backend, c, 16);
    const Trace cheap = tf.prefill(cache, tokens, TraceRequest{});
    std::vector<std::string> names;
    for (const auto& [n, t] : cheap.tensors) names.push_back(n);
    CHECK(names == std::vector<std::string>{"h.0", "h.1", "h.2", "norm", "x0"});
    CHECK(cheap.top_k.size() == 1);  // the last row only
    CHECK(cheap.top_k[0].size() == 10);
    CHECK(cheap.last_logits.size() == size_t(c.vocab_size));

    const Trace more = tf.decode(cache, 11, TraceRequest::everything());
    CHECK(more.pos0 == T);
    auto shape = [&](const std::string& n) {
        const TracedTensor* t = more.find(n);
        return t ? std::pair<int64_t, int64_t>{t->rows, t->cols} : std::pair<int64_t, int64_t>{-1, -1};
    };
    for (int64_t l = 0; l < c.n_layers; ++l) {
        const std::string p = "layers." + std::to_string(l) + ".";
        CHECK(shape(p + "attention_norm") == std::pair<int64_t, int64_t>{1, c.dim});
        CHECK(shape(p + "q") == std::pair<int64_t, int64_t>{1, c.q_dim()});
        CHECK(shape(p + "k") == std::pair<int64_t, int64_t>{1, c.kv_dim()});
        CHECK(shape(p + "v") == std::pair<int64_t, int64_t>{1, c.kv_dim()});
        CHECK(shape(p + "attention.probs") == std::pair<int64_t, int64_t>{c.n_heads, T + 1});
        CHECK(shape(p + "attention_out") == std::pair<int64_t, int64_t>{1, c.dim});
        CHECK(shape(p + "h") == std::pair<int64_t, int64_t>{1, c.dim});
        CHECK(shape(p + "ffn_norm") == std::pair<int64_t, int64_t>{1, c.dim});
        CHECK(shape(p + "ffn_hidden") == std::pair<int64_t, int64_t>{1, c.hidden_dim});
        CHECK(shape(p + "ffn_out") == std::pair<int64_t, int64_t>{1, c.dim});
        CHECK(shape("h." + std::to_string(l)) == std::pair<int64_t, int64_t>{1, c.dim});
        // Probabilities are a distribution over the T0+T positions seen so far.
        for (int64_t h = 0; h < c.n_heads; ++h) {
            const auto p_row = row(*more.find(p + "attention.probs"), h);
            double sum = 0;
            for (float x : p_row) sum += x;
            CHECK(sum == Approx(1.0).epsilon(1e-5));
        }
        // The residual identities of TransformerBlock.forward.
        const auto& x_in = l == 0 ? *more.find("x0") : *more.find("h." + std::to_string(l - 1));
        std::vector<float> h(size_t(c.dim)), out(size_t(c.dim));
        for (int64_t i = 0; i < c.dim; ++i) {
            h[size_t(i)] = x_in.data[size_t(i)] + more.find(p + "attention_out")->data[size_t(i)];
            out[size_t(i)] = h[size_t(i)] + more.find(p + "ffn_out")->data[size_t(i)];
        }
        CHECK(test::rel_l2(more.find(p + "h")->data, h) < 1e-6);
        CHECK(test::rel_l2(more.find("h." + std::to_string(l))->data, out) < 1e-6);
    }
    CHECK(shape("logits") == std::pair<int64_t, int64_t>{1, c.vocab_size});
    CHECK(more.find("logits")->data == more.last_logits);

    TraceRequest probs_prefill;
    probs_prefill.residuals = false;
    probs_prefill.attention_probs = true;
    KVCache c2(*g.backend, c, 16);
    const Trace p2 = tf.prefill(c2, tokens, probs_prefill);
    REQUIRE(p2.find("layers.0.attention.probs"));
    CHECK(p2.find("layers.0.attention.probs")->rows == c.n_heads * T);
    CHECK(p2.find("layers.0.attention.probs")->cols == T);
    CHECK(p2.find("layers.0.attention.probs")->data[1] == 0.0f);  // causal: query 0 never sees key 1
    CHECK(p2.find("x0") == nullptr);
}

TEST_CASE("the KV cache truncates: refeeding after truncate reproduces the logits", "[forward]") {
    Loaded& g = golden();
    const auto tokens = short_prompt();
    Transformer tf(*g.model, *g.backend);
    KVCache cache(*g.backend, g.model->config, 32);
    const Trace full = tf.prefill(cache, tokens, TraceRequest{});
    tf.decode(cache, 42, TraceRequest{});  // a token that will be forgotten
    cache.truncate(int64_t(tokens.size()) - 4);
    CHECK(cache.size() == int64_t(tokens.size()) - 4);
    const Trace again = tf.prefill(cache, std::span(tokens).subspan(tokens.size() - 4), TraceRequest{});
    CHECK(again.pos0 == int64_t(tokens.size()) - 4);
    CHECK(test::rel_l2(again.last_logits, full.last_logits) < 1e-5);
}

TEST_CASE("bad requests become InputError; cancel stops a prefill and leaves the cache as it was", "[forward]") {
    Loaded& g = golden();
    Transformer tf(*g.model, *g.backend);
    KVCache cache(*g.backend, g.model->config, 8);
    CHECK_THROWS_AS(tf.prefill(cache, std::vector<int32_t>{}, TraceRequest{}), InputError);
    try {
        tf.prefill(cache, std::vector<int32_t>{128000, 5, 128256}, TraceRequest{});
        FAIL("no error for an id past the vocabulary");
    } catch (const InputError& e) {
        const std::string m = e.what();
        CHECK(m.find("128256") != std::string::npos);
        CHECK(m.find("position 2") != std::string::npos);
    }
    CHECK_THROWS_AS(tf.prefill(cache, std::vector<int32_t>{-1}, TraceRequest{}), InputError);
    CHECK_THROWS_AS(tf.prefill(cache, std::vector<int32_t>(9, 100), TraceRequest{}), InputError);
    CHECK(cache.size() == 0);
    tf.prefill(cache, std::vector<int32_t>(6, 100), TraceRequest{});
    CHECK_THROWS_AS(tf.prefill(cache, std::vector<int32_t>(3, 100), TraceRequest{}), InputError);  // 6 + 3 > 8
    CHECK(cache.size() == 6);

    std::atomic<bool> cancel{true};
    CHECK_THROWS_AS(tf.prefill(cache, std::vector<int32_t>{1, 2}, TraceRequest{}, &cancel), Cancelled);
    CHECK(cache.size() == 6);
    cancel = false;
    const Trace t = tf.prefill(cache, std::vector<int32_t>{1, 2}, TraceRequest{}, &cancel);
    CHECK(cache.size() == 8);
    CHECK(test::all_finite(t.last_logits));
    CHECK_THROWS_AS(tf.decode(cache, 3, TraceRequest{}), InputError);  // full
}

namespace {
// Forwards every op to a real backend and raises a cancel flag after the n-th matmul: a cancel that arrives
// in the middle of a prefill, at a known point.
class CancellingBackend final : public Backend {
public:
    CancellingBackend(Backend& inner, std::atomic<bool>& flag, int after) : in_(inner), flag_(flag), after_(after) {}
    int matmuls = 0;
    BackendInfo info() const override { return in_.info(); }
    void load(const Model& m, const LoadProgress& p) override { in_.load(m, p); }
    Buf alloc(int64_t n, std::string_view name) override { return in_.alloc(n, name); }
    uint64_t memory_available() const override { return in_.memory_available(); }
    void free(Buf b) override { in_.free(b); }
    void begin() override { in_.begin(); }
    void submit() override { in_.submit(); }
    void embed(Buf o, std::span<const int32_t> t) override { in_.embed(o, t); }
    void rmsnorm(Buf o, Buf x, const TensorView& w, int64_t T, float eps) override { in_.rmsnorm(o, x, w, T, eps); }
    void matmul(Buf o, Buf x, const TensorView& w, int64_t T) override {
        if (++matmuls == after_) flag_ = true;
        in_.matmul(o, x, w, T);
    }
    void rope(Buf x, int64_t T, int64_t h, int64_t pos0) override { in_.rope(x, T, h, pos0); }
    void attention(Buf o, Buf q, Buf k, Buf v, int64_t T, int64_t pos0, Buf p) override {
        in_.attention(o, q, k, v, T, pos0, p);
    }
    void swiglu(Buf o, Buf a, Buf b, int64_t n) override { in_.swiglu(o, a, b, n); }
    void add(Buf o, Buf a, Buf b, int64_t n) override { in_.add(o, a, b, n); }
    void copy(Buf d, Buf s, int64_t n) override { in_.copy(d, s, n); }
    Readback topk(Buf r, int64_t n, int64_t k) override { return in_.topk(r, n, k); }
    Readback readback(Buf s, int64_t n) override { return in_.readback(s, n); }
    std::vector<float> fetch(Readback r) override { return in_.fetch(r); }
    std::vector<TokenScore> topk_result(Readback r) override { return in_.topk_result(r); }

private:
    Backend& in_;
    std::atomic<bool>& flag_;
    int after_;
};
}  // namespace

TEST_CASE("a cancel raised in the middle of a prefill stops it before the next layer", "[forward]") {
    Loaded& g = golden();
    const auto tokens = short_prompt();
    std::atomic<bool> cancel{false};
    // Seven matmuls per block: the flag goes up inside block 0's feed-forward.
    CancellingBackend cb(*g.backend, cancel, 6);
    Transformer tf(*g.model, cb);
    KVCache cache(cb, g.model->config, 32);
    CHECK_THROWS_AS(tf.prefill(cache, tokens, TraceRequest{}, &cancel), Cancelled);
    CHECK(cb.matmuls == 7);  // block 0 finished, block 1 never started
    CHECK(cache.size() == 0);

    cancel = false;
    const Trace after = tf.prefill(cache, tokens, TraceRequest{}, &cancel);
    Transformer clean(*g.model, *g.backend);
    KVCache c2(*g.backend, g.model->config, 32);
    CHECK(test::rel_l2(after.last_logits, clean.prefill(c2, tokens, TraceRequest{}).last_logits) == 0.0);
}

TEST_CASE("check_weights_finite names the tensor and element of a NaN weight in a checkpoint", "[forward]") {
    const fs::path& demo = tiny_demo();
    const fs::path dir = test::temp_dir("nan-demo");
    for (const auto& e : fs::directory_iterator(demo)) fs::copy(e.path(), dir / e.path().filename());
    uint64_t offset = 0;
    {
        auto m = load_model(dir);
        CHECK_NOTHROW(check_weights_finite(*m));
        const TensorView& w2 = m->tensor("layers.1.feed_forward.w2");
        REQUIRE(w2.dtype == DType::BF16);
        offset = w2.file_offset + 2 * 37;
    }
    {
        const uint16_t nan = 0x7fc0;  // bf16 quiet NaN
        std::fstream f(dir / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(std::streamoff(offset));
        f.write(reinterpret_cast<const char*>(&nan), 2);
    }
    auto m = load_model(dir);
    try {
        check_weights_finite(*m);
        FAIL("no error for a NaN weight");
    } catch (const ModelError& e) {
        const std::string msg = e.what();
        INFO(msg);
        CHECK(msg.find("layers.1.feed_forward.w2") != std::string::npos);
        CHECK(msg.find("element 37") != std::string::npos);
        CHECK(msg.find("nan") != std::string::npos);
    }
}

TEST_CASE("check_weights_finite finds Inf and NaN in F32 and F16 weights", "[forward]") {
    for (DType dtype : {DType::F32, DType::F16}) {
        for (bool inf : {false, true}) {
            const int64_t rows = 3, cols = 5000, bad = 2 * cols + 4321;  // past the first 4096-element chunk
            std::vector<std::byte> bytes(dtype_bytes(dtype, rows * cols));
            if (dtype == DType::F32) {
                const float v = inf ? INFINITY : NAN;
                std::memcpy(bytes.data() + 4 * bad, &v, 4);
            } else {
                const uint16_t v = inf ? 0xfc00 /* -inf */ : 0x7e00 /* nan */;
                std::memcpy(bytes.data() + 2 * bad, &v, 2);
            }
            Model m;
            TensorView t;
            t.name = "layers.0.attention.wv";
            t.dtype = dtype;
            t.shape = {rows, cols};
            t.data = bytes.data();
            t.nbytes = bytes.size();
            m.tensors[t.name] = t;
            try {
                check_weights_finite(m);
                FAIL("no error");
            } catch (const ModelError& e) {
                const std::string msg = e.what();
                INFO(msg);
                CHECK(msg.find("layers.0.attention.wv") != std::string::npos);
                CHECK(msg.find("element " + std::to_string(bad)) != std::string::npos);
                CHECK(msg.find("row 2, column 4321") != std::string::npos);
                CHECK(msg.find(inf ? "inf" : "nan") != std::string::npos);
            }
        }
    }
}

TEST_CASE("a context too large for memory is refused before anything is allocated, saying how much", "[forward][memory]") {
    using Catch::Contains;
    Loaded& g = golden();
    // 2^32 positions: 6 TiB of float32 cache for this model (zero-filled, that was the OOM killer or bad_alloc).
    const int64_t huge = int64_t(1) << 32;
    CHECK(kv_cache_bytes(g.model->config, huge) == uint64_t(2) * 3 * huge * 64 * 4);
    try {
        KVCache cache(*g.backend, g.model->config, huge);
        FAIL("no error");
    } catch (const InputError& e) {
        const std::string m = e.what();
        CHECK_THAT(m, Contains("4294967296 tokens") && Contains("KV cache of 6144.00 GiB") && Contains("shorter context"));
    }
    // A single buffer beyond the free memory is refused by the CPU backend too.
    CHECK_THROWS_WITH(g.backend->alloc(int64_t(1) << 42, "scratch"), Contains("scratch") && Contains("available"));
    // And the backend goes on working.
    KVCache small(*g.backend, g.model->config, 32);
    Transformer tf(*g.model, *g.backend);
    CHECK(tf.prefill(small, short_prompt(), {}).last_logits.size() == size_t(g.model->config.vocab_size));
}

TEST_CASE("logits for every position come piece by piece: without kept logits the step holds one piece", "[forward][memory]") {
    Loaded& g = golden();
    const ModelConfig& c = g.model->config;
    const int64_t T = 150;  // three pieces of kLogitRowsPerPiece rows
    std::vector<int32_t> tokens{128000};
    for (int64_t t = 1; t < T; ++t) tokens.push_back(int32_t((t * 7919) % 30000));
    Transformer tf(*g.model, *g.backend);

    TraceRequest kept;
    kept.logits_all_positions = true;
    kept.keep_logits = true;
    KVCache c1(*g.backend, c, T);
    const Trace full = tf.prefill(c1, tokens, kept);
    REQUIRE(full.find("logits"));

    TraceRequest pieces = kept;
    pieces.keep_logits = false;
    std::vector<int64_t> starts;
    std::vector<float> seen;  // [T, vocab]
    pieces.on_logits = [&](int64_t row0, std::span<const float> rows) {
        starts.push_back(row0);
        CHECK(int64_t(rows.size()) <= kLogitRowsPerPiece * c.vocab_size);
        seen.insert(seen.end(), rows.begin(), rows.end());
    };
    KVCache c2(*g.backend, c, T);
    const Trace streamed = tf.prefill(c2, tokens, pieces);
    CHECK(streamed.find("logits") == nullptr);
    CHECK(starts == std::vector<int64_t>{0, 64, 128});
    // The same products over the same rows: the same bits, whichever buffer held them.
    CHECK(seen == full.find("logits")->data);
    REQUIRE(streamed.top_k.size() == size_t(T));
    for (int64_t t = 0; t < T; ++t)
        for (size_t i = 0; i < streamed.top_k[size_t(t)].size(); ++i) {
            CHECK(streamed.top_k[size_t(t)][i].id == full.top_k[size_t(t)][i].id);
            CHECK(streamed.top_k[size_t(t)][i].logit == full.top_k[size_t(t)][i].logit);
        }
    CHECK(streamed.last_logits == full.last_logits);
    // The step's logits buffer: one piece instead of every row.
    CHECK(step_buffer_bytes(c, kept, T) - step_buffer_bytes(c, pieces, T) ==
          uint64_t(T - kLogitRowsPerPiece) * uint64_t(c.vocab_size) * 4);
}

TEST_CASE("trace_bytes is what the trace of the step then holds", "[forward][memory]") {
    Loaded& g = golden();
    const ModelConfig& c = g.model->config;
    const std::vector<int32_t> tokens{128000, 9906, 1917, 11, 1618};
    const int64_t T = int64_t(tokens.size());
    Transformer tf(*g.model, *g.backend);
    TraceRequest some;
    some.names = {"layers.1.ffn_hidden", "layers.0.q"};
    some.top_k = 7;
    TraceRequest everything = TraceRequest::everything();
    everything.top_k = 3;
    for (const TraceRequest& r : {TraceRequest{}, some, everything}) {
        KVCache cache(*g.backend, c, T + 1);
        const Trace trace = tf.prefill(cache, tokens, r);
        uint64_t held = trace.last_logits.size() * 4;
        for (const auto& [n, t] : trace.tensors) held += t.data.size() * 4;
        for (const auto& row : trace.top_k) held += sizeof(row) + row.size() * sizeof(TokenScore);
        CHECK(trace_bytes(c, r, T) == held);
        // And at a later position (attention.probs grows with the positions cached).
        const Trace next = tf.decode(cache, 11, r);
        uint64_t heldNext = next.last_logits.size() * 4;
        for (const auto& [n, t] : next.tensors) heldNext += t.data.size() * 4;
        for (const auto& row : next.top_k) heldNext += sizeof(row) + row.size() * sizeof(TokenScore);
        CHECK(trace_bytes(c, r, 1, T) == heldNext);
    }
    // Far beyond any memory: saturates instead of wrapping around.
    CHECK(trace_bytes(c, everything, int64_t(1) << 40) == UINT64_MAX);
}
