// The whole model on the Vulkan backend: the golden tensors of ../shared/reference within the same bounds as the
// CPU backend, prefill == decode, greedy generation equal to the CPU backend's, a model split over small
// bindings, and clear errors for what cannot work.
#include <algorithm>
#include <atomic>
#include <cmath>

#include "strata/error.hpp"
#include "strata/generate.hpp"
#include "strata/npy.hpp"
#include "strata/transformer.hpp"
#include "vk_helpers.hpp"

using namespace strata;
using namespace strata::test;
namespace fs = std::filesystem;

namespace {

// The model tests run with synchronization validation too: every barrier the forward pass records (and every one
// it leaves out) is checked against the hazards between its dispatches. Cheap on these small models ([model]:
// 11.6 s with it, 14.8 s without, in one run each: noise).
std::unique_ptr<Backend> make_vulkan_synced(uint64_t max_binding_range = 0) {
    const ScopedEnv sync("STRATA_VK_SYNC_VALIDATION", "1");
    return make_vulkan(max_binding_range);
}

constexpr double kTol = 5e-3;  // expected.json "tolerance"

std::vector<int32_t> prompt_tokens(const std::string& which) {
    return expected()["prompts"][which]["tokens"].get<std::vector<int32_t>>();
}

std::vector<float> row_of(const std::vector<float>& data, int64_t cols, int64_t r) {
    return std::vector<float>(data.begin() + r * cols, data.begin() + (r + 1) * cols);
}

int64_t argmax(const std::vector<float>& v) { return std::max_element(v.begin(), v.end()) - v.begin(); }

// Same top-1 as the reference row unless the reference's top-1/top-2 gap is a near tie.
void check_top1(const std::vector<float>& got, const std::vector<float>& ref, int64_t position) {
    std::vector<float> sorted = ref;
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
    double ss = 0;
    for (float x : ref) ss += double(x) * x;
    const double gap = double(sorted[0]) - sorted[1];
    INFO("position " << position << " reference gap " << gap);
    if (gap >= 2 * kTol * std::sqrt(ss / double(ref.size()))) CHECK(argmax(got) == argmax(ref));
}

void check_tensor(const std::vector<float>& got, const fs::path& npy, const std::string& name) {
    const NpyArray ref = read_npy(npy);
    INFO(name << " against " << npy.string());
    REQUIRE(got.size() == ref.data.size());
    REQUIRE(all_finite(got));
    const double err = rel_l2(got, ref.data);
    INFO("relative L2 error " << err);
    CHECK(err < kTol);
}

std::vector<float> joined(const std::vector<Trace>& traces, const std::string& name) {
    std::vector<float> out;
    for (const auto& t : traces) {
        const TracedTensor* tt = t.find(name);
        REQUIRE(tt != nullptr);
        out.insert(out.end(), tt->data.begin(), tt->data.end());
    }
    return out;
}

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

// The short prompt through `backend`, every position's logits kept.
Trace short_prefill(const Model& model, Backend& backend, KVCache& cache) {
    Transformer tf(model, backend);
    TraceRequest req;
    req.logits_all_positions = true;
    req.keep_logits = true;
    return tf.prefill(cache, prompt_tokens("short"), req);
}

void check_short_golden(const Model& model, const Trace& trace) {
    const int64_t T = static_cast<int64_t>(prompt_tokens("short").size()), V = model.config.vocab_size;
    const fs::path dir = reference_dir() / "short";
    for (std::string name : {"x0", "h.0", "h.1", "h.2", "norm", "logits"}) {
        const TracedTensor* t = trace.find(name);
        REQUIRE(t != nullptr);
        CHECK(t->rows == T);
        check_tensor(t->data, dir / (name + ".npy"), name);
    }
    const std::vector<float>& logits = trace.find("logits")->data;
    const NpyArray ref = read_npy(dir / "logits.npy");
    for (int64_t p = 0; p < T; ++p) check_top1(row_of(logits, V, p), row_of(ref.data, V, p), p);
    // The device top-k of every row agrees with the logits it came from.
    REQUIRE(trace.top_k.size() == size_t(T));
    for (int64_t p = 0; p < T; ++p) {
        REQUIRE(!trace.top_k[size_t(p)].empty());
        CHECK(trace.top_k[size_t(p)][0].id == argmax(row_of(logits, V, p)));
    }
}

}  // namespace

TEST_CASE("golden short prompt, every tensor, top-1, greedy continuation", "[vulkan][model][golden]") {
    const auto model = load_model(golden_hf_dir());
    auto gpu = make_vulkan_synced();
    gpu->load(*model);
    KVCache cache(*gpu, model->config, 64);
    const Trace trace = short_prefill(*model, *gpu, cache);
    check_short_golden(*model, trace);
    Transformer tf(*model, *gpu);
    CHECK(greedy(tf, cache, trace, 16) == expected()["prompts"]["short"]["greedy_ids"].get<std::vector<int32_t>>());
    require_no_validation_messages();
}

TEST_CASE("golden long prompt (scaled RoPE at 600+ positions), prefilled in two chunks, split decode",
          "[vulkan][model][golden]") {
    const auto model = load_model(golden_hf_dir());
    const ModelConfig& c = model->config;
    // The greedy continuation decodes over 600+ keys: split over workgroups per head (as long contexts are).
    ScopedEnv split_decode("STRATA_VK_ATTN_SPLIT_FROM", "256");
    auto gpu = make_vulkan_synced();
    gpu->load(*model);
    const auto tokens = prompt_tokens("long");
    const auto T = static_cast<int64_t>(tokens.size());
    const auto e = expected()["prompts"]["long"];
    const auto tail_rows = e["logits_rows"].get<std::vector<int64_t>>();
    const int64_t split = tail_rows.front();  // the second chunk computes logits for every tail row
    REQUIRE(tail_rows.back() == T - 1);

    Transformer tf(*model, *gpu);
    KVCache cache(*gpu, c, T + 16);
    std::vector<Trace> traces;
    traces.push_back(tf.prefill(cache, std::span(tokens).subspan(0, size_t(split)), TraceRequest{}));
    TraceRequest all_rows;
    all_rows.logits_all_positions = true;
    all_rows.keep_logits = true;
    traces.push_back(tf.prefill(cache, std::span(tokens).subspan(size_t(split)), all_rows));

    const fs::path dir = reference_dir() / "long";
    for (std::string name : {"x0", "h.0", "h.1", "h.2", "norm"})
        check_tensor(joined(traces, name), dir / (name + ".npy"), name);
    const std::vector<float>& logits = traces[1].find("logits")->data;
    check_tensor(logits, dir / "logits_tail.npy", "logits_tail");
    const NpyArray ref = read_npy(dir / "logits_tail.npy");
    for (size_t r = 0; r < tail_rows.size(); ++r)
        check_top1(row_of(logits, c.vocab_size, int64_t(r)), row_of(ref.data, c.vocab_size, int64_t(r)), tail_rows[r]);
    CHECK(greedy(tf, cache, traces[1], 16) == e["greedy_ids"].get<std::vector<int32_t>>());
    require_no_validation_messages();
}

TEST_CASE("prefill equals token-by-token decode, streaming and tiled prompt kernels", "[vulkan][model][golden]") {
    const auto model = load_model(golden_hf_dir());
    const auto tokens = prompt_tokens("short");
    const int64_t dim = model->config.dim, T = static_cast<int64_t>(tokens.size());
    for (const char* tiled_from : {"1000000", "2"}) {
        // A CPU device streams the weights for prompts too; from 2 tokens on, the tiled kernel takes them.
        INFO("STRATA_VK_TILED_FROM=" << tiled_from);
        ScopedEnv env("STRATA_VK_TILED_FROM", tiled_from);
        auto gpu = make_vulkan_synced();
        gpu->load(*model);
        Transformer tf(*model, *gpu);
        KVCache a(*gpu, model->config, 32), b(*gpu, model->config, 32);
        const Trace whole = tf.prefill(a, tokens, TraceRequest{});
        Trace last;
        for (int32_t t : tokens) last = tf.decode(b, t, TraceRequest{});
        require_close(last.last_logits, whole.last_logits, 1e-5);
        for (std::string name : {"h.0", "h.2", "norm"})
            require_close(last.find(name)->data, row_of(whole.find(name)->data, dim, T - 1), 1e-5);
        // The prompt's residual stream against the golden tensors.
        for (std::string name : {"x0", "h.0", "h.1", "h.2", "norm"})
            check_tensor(whole.find(name)->data, reference_dir() / "short" / (name + ".npy"), name);
    }
    require_no_validation_messages();
}

TEST_CASE("the residual add fused into wo and w2 changes no bit of the pass", "[vulkan][model][golden]") {
    // A trace that keeps attention_out and ffn_out takes the unfused path (product, then add); the default trace
    // adds the products into the residual stream inside the matvec. Prefill and decode, same logits and
    // residuals to the bit, and fewer dispatches and barriers per decode step.
    const auto model = load_model(golden_hf_dir());
    const auto tokens = prompt_tokens("short");
    auto gpu = make_vulkan_synced();
    gpu->load(*model);
    Transformer tf(*model, *gpu);
    TraceRequest split;
    for (int64_t l = 0; l < model->config.n_layers; ++l)
        for (const char* what : {".attention_out", ".ffn_out"})
            split.names.insert("layers." + std::to_string(l) + what);
    KVCache a(*gpu, model->config, 32), b(*gpu, model->config, 32);
    const Trace fused = tf.prefill(a, tokens, TraceRequest{});
    const Trace unfused = tf.prefill(b, tokens, split);
    CHECK(fused.last_logits == unfused.last_logits);
    CHECK(fused.find("h.1")->data == unfused.find("h.1")->data);
    REQUIRE(unfused.find("layers.1.ffn_out") != nullptr);
    CHECK(fused.find("layers.1.ffn_out") == nullptr);
    const Trace fused_step = tf.decode(a, tokens[0], TraceRequest{});
    const VulkanStepStats fused_stats = vulkan_last_step_stats(*gpu);
    const Trace unfused_step = tf.decode(b, tokens[0], split);
    const VulkanStepStats unfused_stats = vulkan_last_step_stats(*gpu);
    CHECK(fused_step.last_logits == unfused_step.last_logits);
    CHECK(fused_stats.dispatches + 2 * model->config.n_layers <= unfused_stats.dispatches);
    CHECK(fused_stats.barriers < unfused_stats.barriers);
    require_no_validation_messages();
}

TEST_CASE("greedy generation equals the CPU backend's, with the default trace", "[vulkan][model]") {
    const auto model = load_model(golden_hf_dir());
    auto cpu = make_cpu();
    auto gpu = make_vulkan_synced();
    cpu->load(*model);
    gpu->load(*model);
    std::vector<std::vector<int32_t>> ids(2);
    std::vector<std::vector<float>> last_h(2);
    Backend* backends[2] = {cpu.get(), gpu.get()};
    for (int i = 0; i < 2; ++i) {
        Session s(*model, *backends[i], 64);
        s.feed(prompt_tokens("short"));
        GenerateOptions o;
        o.max_tokens = 16;
        s.generate(o, [&](const GeneratedToken& g) {
            ids[size_t(i)].push_back(g.id);
            const TracedTensor* h = g.trace.find("h.2");
            REQUIRE(h != nullptr);
            last_h[size_t(i)] = h->data;
            return true;
        });
    }
    CHECK(ids[1] == ids[0]);
    CHECK(ids[1] == expected()["prompts"]["short"]["greedy_ids"].get<std::vector<int32_t>>());
    require_close(last_h[1], last_h[0], 1e-4);
    require_no_validation_messages();
}

TEST_CASE("the whole model split over 1 MiB bindings gives the same result", "[vulkan][model][golden]") {
    // tok_embeddings (128256 x 128 bf16, 31 MiB) becomes 32 chunks; logits [15, 128256] are split by rows.
    const auto model = load_model(golden_hf_dir());
    auto whole = make_vulkan_synced();
    auto split = make_vulkan_synced(1 << 20);
    whole->load(*model);
    split->load(*model);
    KVCache ca(*whole, model->config, 32), cb(*split, model->config, 32);
    const Trace a = short_prefill(*model, *whole, ca);
    const Trace b = short_prefill(*model, *split, cb);
    check_short_golden(*model, b);
    require_close(b.find("logits")->data, a.find("logits")->data, 1e-5);
    require_no_validation_messages();
}

TEST_CASE("clear errors for a bad device, too much memory, bad input and misuse", "[vulkan][model]") {
    BackendOptions bad = vulkan_options();
    bad.device_index = 99;
    try {
        make_backend(bad);
        FAIL("device 99 should not exist");
    } catch (const DeviceError& e) {
        CHECK_THAT(e.what(), Catch::Contains("no Vulkan device 99"));
    }

    auto gpu = make_vulkan_synced();
    try {
        gpu->alloc(int64_t(1) << 40, "huge");  // 4 TiB
        FAIL("a 4 TiB buffer should not fit");
    } catch (const DeviceError& e) {
        CHECK_THAT(e.what(), Catch::Contains("out of device memory") && Catch::Contains("huge"));
    }

    // Ops outside a step, results before the step ran, ops before load().
    Buf x = gpu->alloc(16, "x");
    CHECK_THROWS_AS(gpu->add(x, x, x, 16), Error);
    gpu->begin();
    Readback r = gpu->readback(x, 16);
    CHECK_THROWS_AS(gpu->fetch(r), Error);
    CHECK_THROWS_AS(gpu->rope(x, 1, 1, 0), Error);
    gpu->submit();
    CHECK(gpu->fetch(r) == std::vector<float>(16, 0.0f));  // alloc() zeroes

    // A weight type an op does not read (a quantized rmsnorm gain), a token outside the vocabulary.
    const auto model = load_model(golden_hf_dir());
    gpu->load(*model);
    auto q4 = random_tensor("q4", DType::F32, {4, 32}, 1);
    q4->view.dtype = DType::Q4_0;
    q4->view.nbytes = dtype_bytes(DType::Q4_0, 4 * 32);
    gpu->begin();
    Buf y = gpu->alloc(16, "y");
    CHECK_THROWS_AS(gpu->rmsnorm(y, x, q4->view, 1, 1e-5f), UnsupportedError);
    Buf h = gpu->alloc(model->config.dim, "h");
    CHECK_THROWS_AS(gpu->embed(h, std::vector<int32_t>{int32_t(model->config.vocab_size)}), InputError);
    gpu->submit();
    require_no_validation_messages();
}

TEST_CASE("load reports progress over every tensor and stops when cancelled", "[vulkan][model]") {
    const auto model = load_model(golden_hf_dir());
    auto gpu = make_vulkan_synced();
    std::vector<std::pair<uint64_t, int64_t>> seen;  // (bytes done, tensors done)
    uint64_t total = 0;
    LoadProgress progress;
    progress.on_progress = [&](uint64_t done, uint64_t all, int64_t tensors, int64_t) {
        seen.emplace_back(done, tensors);
        total = all;
    };
    gpu->load(*model, progress);
    REQUIRE(seen.size() == model->tensors.size());
    uint64_t tensor_bytes = 0;
    for (const auto& [name, t] : model->tensors) tensor_bytes += t.nbytes;
    CHECK(seen.back().first == total);
    CHECK(total == tensor_bytes);
    CHECK(std::is_sorted(seen.begin(), seen.end()));

    std::atomic<bool> cancel{true};
    LoadProgress cancelled;
    cancelled.cancel = &cancel;
    auto other = make_vulkan_synced();
    CHECK_THROWS_AS(other->load(*model, cancelled), Cancelled);
    // A cancelled load leaves no model behind: ops that need one say so.
    Buf x = other->alloc(8, "x");
    other->begin();
    CHECK_THROWS_AS(other->rope(x, 1, 1, 0), Error);
    other->submit();
    require_no_validation_messages();
}
