// strata-cli bench: prefill and decode speed of a model on a backend, the effective weight bandwidth of decode,
// and, measured in the same run, the bandwidth the machine can stream (so the fraction says how close decode
// gets to the memory limit).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "model_args.hpp"
#include "strata/host_memory.hpp"
#ifdef STRATA_HAVE_VULKAN
#include "strata/vulkan.hpp"
#endif

namespace strata::cli {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

uint64_t peak_rss_bytes() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<uint64_t>(u.ru_maxrss) * 1024;  // Linux reports kilobytes
}

// Bytes of weights one decode step reads: every matrix and gain of every block, the final norm, the output
// projection (the embedding table itself when tied), and one row of the embedding table.
uint64_t decode_weight_bytes(const Model& model) {
    uint64_t bytes = 0;
    for (const auto& [name, t] : model.tensors)
        if (name != "tok_embeddings" && name != "output") bytes += t.nbytes;
    bytes += model.output_weight().nbytes;
    bytes += model.tensor("tok_embeddings").row_bytes();
    return bytes;
}

// Floating-point operations of the matrix products of a prefill of T tokens, the figure llama-bench's GFLOP/s
// rests on: 2 per weight per token for every block's matrices, and the output projection once (only the last
// position's logits are computed). Attention, norms and activations are left out (a few percent at T = 64).
double prefill_matmul_flops(const Model& model, int64_t T) {
    double layer_weights = 0;
    for (const auto& [name, t] : model.tensors)
        if (name.rfind("layers.", 0) == 0 && t.shape.size() == 2) layer_weights += double(t.numel());
    return 2.0 * layer_weights * double(T) + 2.0 * double(model.output_weight().numel());
}

// The host's streaming read bandwidth: `threads` threads sum disjoint slices of a buffer of `bytes`
// (much larger than the caches), best of `repeats`. Integer sums with several accumulators let -O3 vectorise
// the loop, so the loads and not the additions set the pace.
struct Bandwidth {
    uint64_t bytes = 0;
    int threads = 0;
    double seconds = 0;
    double gb_per_s = 0;
};
Bandwidth host_read_bandwidth(uint64_t bytes, int threads, int repeats, bool huge_pages) {
    const size_t n = bytes / sizeof(uint64_t);
    // The same kind of memory as the weights decode reads: with huge pages asked for where the CPU backend keeps
    // its copy of them there, ordinary pages (as a file mapping's) where it reads them mapped.
    std::vector<uint64_t> small;
    HugePageBuffer large;
    if (huge_pages) large = HugePageBuffer(n * sizeof(uint64_t));
    if (large.size() == 0) small.resize(n);
    uint64_t* buf = large.size() ? reinterpret_cast<uint64_t*>(large.data()) : small.data();
    // Fill in parallel so that pages land near the threads that read them.
    auto parallel = [&](auto&& fn) {
        std::vector<std::thread> ts;
        for (int t = 0; t < threads; ++t) ts.emplace_back([&, t] { fn(n * size_t(t) / size_t(threads), n * size_t(t + 1) / size_t(threads)); });
        for (auto& th : ts) th.join();
    };
    parallel([&](size_t a, size_t b) {
        for (size_t i = a; i < b; ++i) buf[i] = i * 0x9e3779b97f4a7c15ull;
    });
    std::vector<uint64_t> sums(size_t(threads) * 8);  // one cache line per thread
    Bandwidth best;
    best.bytes = n * sizeof(uint64_t);
    best.threads = threads;
    best.seconds = 1e30;
    for (int r = 0; r < repeats; ++r) {
        const auto t0 = Clock::now();
        std::vector<std::thread> ts;
        for (int t = 0; t < threads; ++t)
            ts.emplace_back([&, t] {
                const size_t a = n * size_t(t) / size_t(threads), b = n * size_t(t + 1) / size_t(threads);
                uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
                size_t i = a;
                for (; i + 4 <= b; i += 4) s0 += buf[i], s1 += buf[i + 1], s2 += buf[i + 2], s3 += buf[i + 3];
                for (; i < b; ++i) s0 += buf[i];
                sums[size_t(t) * 8] = s0 + s1 + s2 + s3;
            });
        for (auto& th : ts) th.join();
        best.seconds = std::min(best.seconds, seconds_since(t0));
    }
    uint64_t check = 0;
    for (uint64_t s : sums) check += s;
    if (check == 42) std::fprintf(stderr, " ");  // keeps the sums alive
    best.gb_per_s = double(best.bytes) / best.seconds / 1e9;
    return best;
}

int run_bench(const Args& args) {
    auto keys = model_option_keys();
    keys.insert(keys.end(), {"prompt", "gen", "bandwidth-mib", "repeats", "kv-cache"});
    args.allow_only(keys);
    const int64_t n_prompt = args.get_int("prompt", 128);
    const int64_t n_gen = args.get_int("gen", 32);
    const int64_t bandwidth_mib = args.get_int("bandwidth-mib", 1024);
    const int repeats = static_cast<int>(args.get_int("repeats", 5));
    if (n_prompt < 1 || n_gen < 1) throw UsageError("--prompt and --gen must be at least 1");
    if (bandwidth_mib < 1024) throw UsageError("--bandwidth-mib must be at least 1024 (1 GiB defeats the caches)");
    if (repeats < 1) throw UsageError("--repeats must be at least 1");
    const KvCacheType kv_cache = kv_cache_option(args);

    auto t_load = Clock::now();
    LoadedModel m = load_model_and_backend(args, /*integer_dot=*/true);
    const double load_s = seconds_since(t_load);
    const Model& model = *m.model;
    const ModelConfig& c = model.config;
    if (n_prompt + n_gen > c.max_seq_len) throw UsageError("--prompt + --gen exceeds the model's context");

    // A fixed prompt of ordinary tokens (no specials) after <|begin_of_text|>.
    std::vector<int32_t> prompt{c.bos_id};
    for (int64_t i = 1; i < n_prompt; ++i) prompt.push_back(static_cast<int32_t>((i * 7919 + 13) % std::min<int64_t>(c.vocab_size, 128000)));

    Transformer tf(model, *m.backend);
    KVCache cache(*m.backend, c, n_prompt + n_gen + 1, kv_cache);
    TraceRequest cheap;
    cheap.residuals = false;
    cheap.top_k = 0;

    // A warm-up pass of the prompt (its first 512 tokens), as llama-bench's: it touches every weight page and
    // sizes the scratch buffers for the measured pass (an 8-token one left that to the measurement), then the
    // cache is rewound.
    tf.prefill(cache, std::span(prompt).subspan(0, std::min<size_t>(prompt.size(), 512)), cheap);
    cache.truncate(0);

    auto t = Clock::now();
    Trace trace = tf.prefill(cache, prompt, cheap);
    const double prefill_s = seconds_since(t);

    std::vector<float> logits = trace.last_logits;
    std::vector<double> step_s;
    std::vector<double> record_ms;  // Vulkan: host time recording each decode step (one step's alone is noisy)
    for (int64_t i = 0; i < n_gen; ++i) {
        const auto id = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
        t = Clock::now();
        logits = tf.decode(cache, id, cheap).last_logits;
        step_s.push_back(seconds_since(t));
#ifdef STRATA_HAVE_VULKAN
        if (m.backend->info().backend == "vulkan") record_ms.push_back(vulkan_last_step_stats(*m.backend).record_ms);
#endif
    }
#ifdef STRATA_HAVE_VULKAN
    const VulkanStepStats last_decode = m.backend->info().backend == "vulkan" ? vulkan_last_step_stats(*m.backend)
                                                                             : VulkanStepStats{};
#endif
    std::sort(record_ms.begin(), record_ms.end());
    double decode_s = 0;
    for (double s : step_s) decode_s += s;
    std::vector<double> sorted = step_s;
    std::sort(sorted.begin(), sorted.end());
    const double median_s = sorted[sorted.size() / 2];

    const uint64_t weight_bytes = decode_weight_bytes(model);
    const double decode_tok_s = double(n_gen) / decode_s;
    const double decode_gb_s = double(weight_bytes) * decode_tok_s / 1e9;

    const uint64_t rss = peak_rss_bytes();  // before the bandwidth buffer inflates it
    nlohmann::json machine, decode_step;
    double machine_gb_s = 0;
    const std::string backend_name = m.backend->info().backend;
    if (backend_name == "cpu") {
        const int threads = args.get_int("threads", 0) > 0 ? static_cast<int>(args.get_int("threads", 0))
                                                           : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
        // Where decode reads the weights from: the backend's copy (huge pages asked for) or the mapped file.
        const CpuWeightMemory wm = cpu_weight_memory(*m.backend);
        const bool huge = wm.huge_page_bytes > 0;
        const Bandwidth bw = host_read_bandwidth(uint64_t(bandwidth_mib) << 20, threads, repeats, huge);
        machine_gb_s = bw.gb_per_s;
        machine = {{"what", std::string("host memory, multithreaded streaming read") +
                                (huge ? " (huge pages, as the weights)" : "")},
                   {"bytes", bw.bytes}, {"threads", bw.threads}, {"best_of", repeats}, {"seconds", bw.seconds},
                   {"gb_per_s", bw.gb_per_s}, {"weights_resident_bytes", wm.resident_bytes},
                   {"weights_huge_page_bytes", wm.huge_page_bytes}, {"weights_grouped_bytes", wm.grouped_bytes}};
    } else {
#ifdef STRATA_HAVE_VULKAN
        const VulkanBandwidth bw = vulkan_read_bandwidth(*m.backend, 0, repeats);
        machine_gb_s = bw.gb_per_s;
        machine = {{"what", "device memory, streaming read shader (GPU timestamps)"}, {"bytes", bw.bytes},
                   {"best_of", repeats}, {"seconds", bw.seconds}, {"gb_per_s", bw.gb_per_s}};
        // The fixed cost of the last decode token: what was recorded for it and how long recording took.
        decode_step = {{"dispatches", last_decode.dispatches},
                       {"barriers", last_decode.barriers},
                       {"descriptor_writes", last_decode.descriptor_writes},
                       {"record_ms", last_decode.record_ms},
                       {"record_ms_median", record_ms.empty() ? 0.0 : record_ms[record_ms.size() / 2]},
                       {"record_ms_min", record_ms.empty() ? 0.0 : record_ms.front()},
                       {"gpu_ms", last_decode.gpu_ms},
                       {"submissions", last_decode.submissions},
                       {"first_submit_ms", last_decode.first_submit_ms}};
        const VulkanMemoryPlacement placed = vulkan_memory_placement(*m.backend);
        machine["device_local_bytes"] = placed.device_local_bytes;
        machine["host_visible_fallback_bytes"] = placed.host_visible_bytes;
        machine["buffers"] = placed.buffers;
        machine["memory_allocations"] = placed.allocations;
#endif
    }

    const nlohmann::json out = {
        {"model", model_json(model, *m.backend)},
        {"load_seconds", load_s},
        {"kv_cache", kv_cache_type_name(kv_cache)},
        {"kv_cache_bytes", kv_cache_bytes(c, n_prompt + n_gen + 1, kv_cache)},
        {"prefill",
         {{"tokens", n_prompt},
          {"seconds", prefill_s},
          {"tokens_per_second", double(n_prompt) / prefill_s},
          {"matmul_gflop_per_second", prefill_matmul_flops(model, n_prompt) / prefill_s / 1e9}}},
        {"decode",
         {{"tokens", n_gen},
          {"seconds", decode_s},
          {"tokens_per_second", decode_tok_s},
          {"median_ms_per_token", median_s * 1e3},
          {"weight_bytes_per_token", weight_bytes},
          {"effective_weight_gb_per_s", decode_gb_s}}},
        {"decode_step", decode_step},
        {"machine_bandwidth", machine},
        {"decode_bandwidth_fraction", machine_gb_s > 0 ? decode_gb_s / machine_gb_s : 0.0},
        {"peak_rss_bytes", rss},
    };
    std::printf("%s\n", json_text(out, 2).c_str());
    return 0;
}

}  // namespace

STRATA_COMMAND(Command{"bench",
                       "--model PATH [--backend cpu|vulkan] [--device N] [--threads N] [--exact] [--cpu-isa NAME] [--prompt N] [--gen M] "
                       "[--bandwidth-mib N] [--repeats R] [--kv-cache f32|f16]",
                       "prefill and decode tokens/s, effective weight GB/s of decode, the machine's memory "
                       "bandwidth and the fraction decode reaches (JSON)",
                       run_bench,
                       with_model_options({
                           {"prompt", "N", "prompt tokens for the prefill measurement (default 128)"},
                           {"gen", "M", "tokens to decode for the decode measurement (default 32)"},
                           {"bandwidth-mib", "N", "MiB read by the memory bandwidth probe (default 1024)"},
                           {"repeats", "R", "repeats of the memory bandwidth probe; the best counts (default 5)"},
                           {"kv-cache", "f32|f16", kv_cache_help()},
                       })});

}  // namespace strata::cli
