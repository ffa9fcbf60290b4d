// The whole model against the golden tensors of ../shared/reference (an independent float64 implementation of
// Meta's model.py with Llama 3.1 scaled RoPE), through the CPU backend.
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "catch.hpp"
#include "strata/backend.hpp"
#include "strata/model.hpp"
#include "strata/npy.hpp"
#include "strata/transformer.hpp"
#include "support.hpp"

using namespace strata;
namespace fs = std::filesystem;

namespace {

constexpr double kTol = 5e-3;  // expected.json "tolerance"

struct Golden {
    std::unique_ptr<Model> model;
    std::unique_ptr<Backend> backend;
    Golden() {
        model = load_model(test::golden_hf_dir());
        backend = make_backend(BackendOptions{});
        backend->load(*model);
    }
};

Golden& golden() {
    static Golden g;
    return g;
}

std::vector<int32_t> prompt_tokens(const std::string& which) {
    return test::expected()["prompts"][which]["tokens"].get<std::vector<int32_t>>();
}

// Rows [r0, r1) of a [rows, cols] row-major tensor.
std::vector<float> rows_of(const std::vector<float>& data, int64_t cols, int64_t r0, int64_t r1) {
    return std::vector<float>(data.begin() + r0 * cols, data.begin() + r1 * cols);
}

double rms(const std::vector<float>& v) {
    double s = 0;
    for (float x : v) s += double(x) * x;
    return std::sqrt(s / double(v.size()));
}

int64_t argmax(std::span<const float> v) {
    return std::max_element(v.begin(), v.end()) - v.begin();
}

// Same top-1 as the reference row, unless the reference's top-1/top-2 gap is a near tie.
void check_top1(const std::vector<float>& got, const std::vector<float>& ref, int64_t position) {
    std::vector<float> sorted = ref;
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
    const double gap = double(sorted[0]) - sorted[1];
    const bool near_tie = gap < 2 * kTol * rms(ref);
    INFO("position " << position << " reference gap " << gap);
    if (!near_tie) CHECK(argmax(got) == argmax(ref));
}

// Joins the [T, n] captures of several traces of one sequence into one [sum T, n] tensor.
std::vector<float> joined(const std::vector<Trace>& traces, const std::string& name) {
    std::vector<float> out;
    for (const auto& t : traces) {
        const TracedTensor* tt = t.find(name);
        REQUIRE(tt != nullptr);
        out.insert(out.end(), tt->data.begin(), tt->data.end());
    }
    return out;
}

void check_tensor(const std::vector<float>& got, const fs::path& npy, const std::string& name) {
    const NpyArray ref = read_npy(npy);
    INFO(name << " against " << npy.string());
    REQUIRE(got.size() == ref.data.size());
    const double err = test::rel_l2(got, ref.data);
    CHECK(err < kTol);
}

// Greedy continuation through the KV cache after the prompt.
std::vector<int32_t> greedy(Transformer& tf, KVCache& cache, const Trace& prompt_trace, int n) {
    std::vector<int32_t> ids;
    std::vector<float> logits = prompt_trace.last_logits;
    TraceRequest cheap;
    cheap.residuals = false;
    cheap.top_k = 0;
    for (int i = 0; i < n; ++i) {
        const auto id = static_cast<int32_t>(argmax(logits));
        ids.push_back(id);
        if (i + 1 < n) logits = tf.decode(cache, id, cheap).last_logits;
    }
    return ids;
}

}  // namespace

TEST_CASE("golden short prompt: every tensor, top-1 and greedy continuation", "[golden]") {
    Golden& g = golden();
    const ModelConfig& c = g.model->config;
    REQUIRE(c.tie_embeddings);
    REQUIRE(c.rope_scaling.enabled);
    const auto tokens = prompt_tokens("short");
    const auto T = static_cast<int64_t>(tokens.size());
    Transformer tf(*g.model, *g.backend);
    KVCache cache(*g.backend, c, 64);
    TraceRequest req;
    req.logits_all_positions = true;
    req.keep_logits = true;
    const Trace trace = tf.prefill(cache, tokens, req);
    CHECK(cache.size() == T);

    const fs::path dir = test::reference_dir() / "short";
    for (std::string name : {"x0", "h.0", "h.1", "h.2", "norm", "logits"}) {
        const TracedTensor* t = trace.find(name);
        REQUIRE(t != nullptr);
        CHECK(t->rows == T);
        check_tensor(t->data, dir / (name + ".npy"), name);
    }
    const TracedTensor* logits = trace.find("logits");
    const NpyArray ref = read_npy(dir / "logits.npy");
    REQUIRE(ref.shape == std::vector<int64_t>{T, c.vocab_size});
    for (int64_t p = 0; p < T; ++p)
        check_top1(rows_of(logits->data, c.vocab_size, p, p + 1), rows_of(ref.data, c.vocab_size, p, p + 1), p);
    // The top-k kept for every row agrees with the logits it came from.
    REQUIRE(trace.top_k.size() == size_t(T));
    CHECK(trace.top_k[3][0].id == argmax(rows_of(logits->data, c.vocab_size, 3, 4)));

    const auto want = test::expected()["prompts"]["short"]["greedy_ids"].get<std::vector<int32_t>>();
    CHECK(greedy(tf, cache, trace, 16) == want);
}

TEST_CASE("golden long prompt (scaled RoPE at 600+ positions), prefilled in two chunks", "[golden]") {
    Golden& g = golden();
    const ModelConfig& c = g.model->config;
    const auto tokens = prompt_tokens("long");
    const auto T = static_cast<int64_t>(tokens.size());
    const auto e = test::expected()["prompts"]["long"];
    const auto tail_rows = e["logits_rows"].get<std::vector<int64_t>>();
    REQUIRE(T > 600);
    // The first chunk ends before the first row of logits_tail; the second computes logits for every row.
    const int64_t split = tail_rows.front();
    REQUIRE(tail_rows.back() == T - 1);

    Transformer tf(*g.model, *g.backend);
    KVCache cache(*g.backend, c, T + 16);
    std::vector<Trace> traces;
    traces.push_back(tf.prefill(cache, std::span(tokens).subspan(0, size_t(split)), TraceRequest{}));
    TraceRequest all_rows;
    all_rows.logits_all_positions = true;
    all_rows.keep_logits = true;
    traces.push_back(tf.prefill(cache, std::span(tokens).subspan(size_t(split)), all_rows));
    CHECK(traces[1].pos0 == split);

    const fs::path dir = test::reference_dir() / "long";
    for (std::string name : {"x0", "h.0", "h.1", "h.2", "norm"}) check_tensor(joined({traces}, name), dir / (name + ".npy"), name);
    const std::vector<float> logits = traces[1].find("logits")->data;  // [T - split, vocab]
    check_tensor(logits, dir / "logits_tail.npy", "logits_tail");
    const NpyArray ref = read_npy(dir / "logits_tail.npy");
    for (size_t r = 0; r < tail_rows.size(); ++r)
        check_top1(rows_of(logits, c.vocab_size, int64_t(r), int64_t(r) + 1),
                   rows_of(ref.data, c.vocab_size, int64_t(r), int64_t(r) + 1), tail_rows[r]);

    CHECK(greedy(tf, cache, traces[1], 16) == e["greedy_ids"].get<std::vector<int32_t>>());
}

TEST_CASE("golden short prompt with the weight matrices in the CPU backend's own huge-page memory: the same bits",
          "[golden]") {
    // STRATA_CPU_HUGE_PAGES=1 copies the matrices at any size (by default only from 64 MiB: the golden model is
    // smaller), =0 reads them where the file is mapped. The copy must change nothing: same logits, same tokens.
    const auto model = load_model(test::golden_hf_dir());
    const auto tokens = prompt_tokens("short");
    auto run = [&](const char* mode, CpuWeightMemory& memory) {
        test::CpuHugePages env(mode);
        auto backend = make_backend(BackendOptions{});
        backend->load(*model);
        memory = cpu_weight_memory(*backend);
        Transformer tf(*model, *backend);
        KVCache cache(*backend, model->config, 64);
        TraceRequest req;
        req.logits_all_positions = true;
        req.keep_logits = true;
        const Trace trace = tf.prefill(cache, tokens, req);
        std::vector<float> all = trace.find("logits")->data;
        const Trace step = tf.decode(cache, tokens[0], TraceRequest{});
        all.insert(all.end(), step.last_logits.begin(), step.last_logits.end());
        return all;
    };
    CpuWeightMemory copied, mapped;
    const std::vector<float> a = run("1", copied), b = run("0", mapped);
    CHECK(a == b);
    // Every matrix a product reads: wq, wk, wv, wo, w1, w2, w3 of each layer and the (tied) output table.
    uint64_t matrices = 0;
    for (const auto& [name, t] : model->tensors)
        if (t.shape.size() == 2) matrices += t.nbytes;  // tok_embeddings is the output here
    INFO("copied " << copied.resident_bytes << " bytes, " << copied.huge_page_bytes << " in huge pages");
    CHECK(copied.resident_bytes == matrices);
    CHECK(copied.huge_page_bytes <= copied.resident_bytes);
    CHECK(mapped.resident_bytes == 0);
    CHECK(cpu_weight_memory(*make_backend(BackendOptions{})).resident_bytes == 0);  // nothing loaded
}
