// Measurements and checks for real GPUs, hidden from ctest (their tags start with '.'); scripts/gpu-bench.sh
// runs them on a machine with a GPU.
//   [.bench]  STRATA_BENCH_MODEL=DIR: load time, prefill and decode (wall and GPU time), the host time spent
//             recording a step, the cost of the default trace, the device's read bandwidth, and a sweep of
//             matvec shapes (STRATA_BENCH_SWEEP="WG,ROWS WG,ROWS ..."). JSON to STRATA_BENCH_OUT or stdout.
//   [.check]  STRATA_CHECK_MODEL=DIR: the Vulkan backend against the CPU backend on that model (prefill and
//             greedy decode), with validation as STRATA_VK_VALIDATION says.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "strata/transformer.hpp"
#include "vk_helpers.hpp"

using namespace strata;
using namespace strata::test;

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int64_t env_int(const char* name, int64_t fallback) {
    const char* e = std::getenv(name);
    return e ? std::atoll(e) : fallback;
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

uint64_t decode_weight_bytes(const Model& model) {
    uint64_t bytes = 0;
    for (const auto& [name, t] : model.tensors)
        if (name != "tok_embeddings" && name != "output") bytes += t.nbytes;
    return bytes + model.output_weight().nbytes + model.tensor("tok_embeddings").row_bytes();
}

std::vector<int32_t> bench_prompt(const ModelConfig& c, int64_t n) {
    std::vector<int32_t> p{c.bos_id};
    for (int64_t i = 1; i < n; ++i)
        p.push_back(static_cast<int32_t>((i * 7919 + 13) % std::min<int64_t>(c.vocab_size, 128000)));
    return p;
}

// Decode `n` greedy steps; per step: wall seconds and GPU milliseconds.
struct Steps {
    std::vector<double> wall_s, gpu_ms, record_ms;
    VulkanStepStats last;
};
Steps decode_steps(Transformer& tf, KVCache& cache, Backend& b, std::vector<float> logits, int64_t n,
                   const TraceRequest& req) {
    Steps s;
    for (int64_t i = 0; i < n; ++i) {
        const auto id = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
        const auto t = Clock::now();
        logits = tf.decode(cache, id, req).last_logits;
        s.wall_s.push_back(since(t));
        s.gpu_ms.push_back(vulkan_last_step_gpu_ms(b));
        s.last = vulkan_last_step_stats(b);
        s.record_ms.push_back(s.last.record_ms);
    }
    return s;
}

}  // namespace

TEST_CASE("vulkan bench: decode, prefill, trace cost, bandwidth, matvec shapes", "[.bench]") {
    const char* path = std::getenv("STRATA_BENCH_MODEL");
    if (!path) {
        WARN("set STRATA_BENCH_MODEL to a model folder");
        return;
    }
    const int64_t n_prompt = env_int("STRATA_BENCH_PROMPT", 512), n_gen = env_int("STRATA_BENCH_GEN", 64);
    auto t = Clock::now();
    const auto model = load_model(path);
    const double map_s = since(t);
    const ModelConfig& c = model->config;
    const uint64_t weight_bytes = decode_weight_bytes(*model);
    const auto prompt = bench_prompt(c, n_prompt);
    TraceRequest cheap;
    cheap.residuals = false;
    cheap.top_k = 0;

    nlohmann::json out;
    out["model"] = {{"path", path}, {"parameters", model->parameter_count()}, {"weight_bytes_per_token", weight_bytes}};
    {
        auto gpu = make_backend(vulkan_options());
        out["device"] = {
            {"name", gpu->info().device}, {"type", gpu->info().device_type}, {"driver", gpu->info().driver}};
        t = Clock::now();
        gpu->load(*model);
        out["upload_seconds"] = since(t);
        out["map_seconds"] = map_s;

        Transformer tf(*model, *gpu);
        KVCache cache(*gpu, c, n_prompt + 2 * n_gen + 8);
        tf.prefill(cache, std::span(prompt).subspan(0, std::min<size_t>(8, prompt.size())), cheap);  // warm-up
        cache.truncate(0);
        t = Clock::now();
        const Trace pre = tf.prefill(cache, prompt, cheap);
        const double prefill_s = since(t);
        out["prefill"] = {{"tokens", n_prompt},
                          {"wall_seconds", prefill_s},
                          {"gpu_ms", vulkan_last_step_gpu_ms(*gpu)},
                          {"tokens_per_second", double(n_prompt) / prefill_s}};

        const Steps plain = decode_steps(tf, cache, *gpu, pre.last_logits, n_gen, cheap);
        const Steps traced = decode_steps(tf, cache, *gpu, pre.last_logits, n_gen, TraceRequest{});
        const double wall = median(plain.wall_s), gpu_ms = median(plain.gpu_ms);
        const double bw_wall = double(weight_bytes) / wall * 1e-9,
                     bw_gpu = double(weight_bytes) / (gpu_ms * 1e-3) * 1e-9;
        const VulkanBandwidth bw = vulkan_read_bandwidth(*gpu, 0, 5);
        out["read_bandwidth"] = {{"bytes", bw.bytes}, {"gb_per_s", bw.gb_per_s}};
        out["decode"] = {
            {"tokens", n_gen},
            {"median_wall_ms", wall * 1e3},
            {"median_gpu_ms", gpu_ms},
            {"host_ms_outside_gpu", (wall * 1e3 - gpu_ms)},
            {"median_record_ms", median(plain.record_ms)},
            {"dispatches_per_step", plain.last.dispatches},
            {"barriers_per_step", plain.last.barriers},
            {"descriptor_writes_per_step", plain.last.descriptor_writes},
            {"tokens_per_second_wall", 1.0 / wall},
            {"weight_gb_per_s_wall", bw_wall},
            {"weight_gb_per_s_gpu", bw_gpu},
            {"fraction_of_read_bandwidth_wall", bw_wall / bw.gb_per_s},
            {"fraction_of_read_bandwidth_gpu", bw_gpu / bw.gb_per_s},
        };
        // The default trace (residual stream, final norm, top-10 of the logits) against none.
        const double traced_wall = median(traced.wall_s), traced_gpu = median(traced.gpu_ms);
        out["default_trace"] = {{"median_wall_ms", traced_wall * 1e3},
                                {"median_gpu_ms", traced_gpu},
                                {"cost_fraction_wall", traced_wall / wall - 1.0},
                                {"cost_fraction_gpu", traced_gpu / gpu_ms - 1.0}};
    }

    // Matvec shapes: each in a fresh backend (the shape is read when a backend is made).
    std::istringstream sweep(std::getenv("STRATA_BENCH_SWEEP") ? std::getenv("STRATA_BENCH_SWEEP") : "");
    std::string shape;
    while (sweep >> shape) {
        ScopedEnv env("STRATA_VK_MATVEC", shape.c_str());
        auto gpu = make_backend(vulkan_options());
        gpu->load(*model);
        Transformer tf(*model, *gpu);
        KVCache cache(*gpu, c, 64);
        const Trace pre = tf.prefill(cache, std::span(prompt).subspan(0, std::min<size_t>(16, prompt.size())), cheap);
        const Steps s = decode_steps(tf, cache, *gpu, pre.last_logits, 24, cheap);
        out["matvec_sweep"][shape] = {{"median_gpu_ms", median(s.gpu_ms)},
                                      {"median_wall_ms", median(s.wall_s) * 1e3},
                                      {"weight_gb_per_s_gpu", double(weight_bytes) / (median(s.gpu_ms) * 1e-3) * 1e-9}};
    }

    const std::string text = out.dump(2);
    if (const char* file = std::getenv("STRATA_BENCH_OUT")) std::ofstream(file) << text << "\n";
    std::printf("%s\n", text.c_str());
}

TEST_CASE("vulkan check: the Vulkan backend agrees with the CPU backend on a model", "[.check]") {
    const char* path = std::getenv("STRATA_CHECK_MODEL");
    if (!path) {
        WARN("set STRATA_CHECK_MODEL to a model folder");
        return;
    }
    const auto model = load_model(path);
    const ModelConfig& c = model->config;
    const auto prompt = bench_prompt(c, env_int("STRATA_CHECK_PROMPT", 24));
    auto cpu = make_cpu();
    BackendOptions co;
    co.name = "cpu";
    cpu = make_backend(co);  // every core: this model may be big
    auto gpu = make_vulkan();
    cpu->load(*model);
    gpu->load(*model);
    Backend* backends[2] = {cpu.get(), gpu.get()};
    std::vector<Trace> pre;
    std::vector<std::vector<std::vector<float>>> steps(2);
    for (int i = 0; i < 2; ++i) {
        Transformer tf(*model, *backends[i]);
        KVCache cache(*backends[i], c, int64_t(prompt.size()) + 16);
        TraceRequest req;
        req.logits_all_positions = true;
        req.keep_logits = true;
        pre.push_back(tf.prefill(cache, prompt, req));
        // Decode the same tokens on both (the CPU's greedy choices), so near ties cannot make them diverge.
        for (int s = 0; s < 8; ++s) {
            const int32_t id = static_cast<int32_t>((s * 104729 + 7) % 128000);
            steps[size_t(i)].push_back(tf.decode(cache, id, TraceRequest{}).last_logits);
        }
    }
    const std::string last = "h." + std::to_string(c.n_layers - 1);
    for (const std::string name : {"x0", "h.0", last.c_str(), "norm", "logits"}) {
        INFO(name);
        require_close(pre[1].find(name)->data, pre[0].find(name)->data, 2e-3);
    }
    for (size_t s = 0; s < steps[0].size(); ++s) {
        INFO("decode step " << s);
        require_close(steps[1][s], steps[0][s], 2e-3);
    }
    require_no_validation_messages();
}
