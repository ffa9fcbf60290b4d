// A step goes to the device in parts as it is recorded (the first after a few dispatches, then ever larger ones),
// so that the device starts while the host still records. The parts must change no bit of any result, each
// must be ordered by the same barriers as the whole step (queue order alone does not make one part's writes
// visible to the next; a pipeline barrier's scopes reach across submissions on the queue), and a step
// abandoned after some parts were submitted must leave the backend usable.
#include "strata/error.hpp"
#include "strata/transformer.hpp"
#include "vk_helpers.hpp"

using namespace strata;
using namespace strata::test;

namespace {

struct Run {
    Trace prompt, step1, step2;
    VulkanStepStats stats;
};

// The golden model's short prompt (one submission per layer piece) and two decode steps, with the trace the
// explorer asks for on the first step and the default on the second.
Run run_golden(const Model& model, const char* submit) {
    const ScopedEnv env("STRATA_VK_SUBMIT", submit);
    const std::vector<int32_t> tokens = expected()["prompts"]["short"]["tokens"].get<std::vector<int32_t>>();
    auto gpu = make_vulkan();
    gpu->load(model);
    Transformer tf(model, *gpu);
    KVCache cache(*gpu, model.config, 32);
    TraceRequest all;
    all.names.insert("layers.1.q");
    all.names.insert("layers.2.attention_out");
    all.names.insert("layers.0.ffn_hidden");
    all.top_k = 5;
    Run r;
    r.prompt = tf.prefill(cache, tokens, all);
    r.step1 = tf.decode(cache, tokens[1], all);
    r.step2 = tf.decode(cache, tokens[2], TraceRequest{});
    r.stats = vulkan_last_step_stats(*gpu);
    return r;
}

}  // namespace

TEST_CASE("a step submitted in parts as it is recorded changes no bit, with the same barriers as the whole step",
          "[vulkan][parts][model][golden]") {
    const ScopedEnv sync("STRATA_VK_SYNC_VALIDATION", "1");
    const auto model = load_model(golden_hf_dir());
    const Run whole = run_golden(*model, "0");        // one submission per step
    const Run parts = run_golden(*model, "");         // the default: 8 dispatches, then 16, 32, 64, 64, ...
    const Run every = run_golden(*model, "1,1");      // every dispatch a part of its own
    for (const Run* r : {&parts, &every}) {
        for (const char* name : {"layers.1.q", "layers.2.attention_out", "layers.0.ffn_hidden", "h.2", "norm"}) {
            INFO(name);
            REQUIRE(r->prompt.find(name) != nullptr);
            CHECK(r->prompt.find(name)->data == whole.prompt.find(name)->data);
            CHECK(r->step1.find(name)->data == whole.step1.find(name)->data);
        }
        CHECK(r->prompt.last_logits == whole.prompt.last_logits);
        CHECK(r->step1.last_logits == whole.step1.last_logits);
        CHECK(r->step2.last_logits == whole.step2.last_logits);
        REQUIRE(r->step1.top_k.size() == 1);
        REQUIRE(r->step1.top_k[0].size() == whole.step1.top_k[0].size());
        for (size_t i = 0; i < r->step1.top_k[0].size(); ++i)
            CHECK(r->step1.top_k[0][i].id == whole.step1.top_k[0][i].id);
    }
    INFO("dispatches " << whole.stats.dispatches << ", submissions " << whole.stats.submissions << " / "
                       << parts.stats.submissions << " / " << every.stats.submissions << ", barriers "
                       << whole.stats.barriers << " / " << parts.stats.barriers << " / " << every.stats.barriers);
    CHECK(whole.stats.submissions == 1);
    CHECK(whole.stats.first_submit_ms == whole.stats.record_ms);
    // The golden decode step has more than 8 dispatches (22 since matmul_add_rmsnorm): at least two parts by
    // default; `every` crosses a part boundary after each of its dispatches.
    REQUIRE(whole.stats.dispatches > 8);
    CHECK(parts.stats.submissions >= 2);
    CHECK(parts.stats.first_submit_ms < parts.stats.record_ms);
    CHECK(every.stats.submissions == every.stats.dispatches);
    CHECK(every.stats.dispatches == whole.stats.dispatches);
    // The hazard tracking runs on across parts: a write in one part read in the next gets its barrier as within
    // one command buffer, so the parts record exactly the whole step's barriers (forgetting the tracked ranges at
    // a part boundary would drop some: the golden decode step then records fewer).
    CHECK(parts.stats.barriers == whole.stats.barriers);
    CHECK(every.stats.barriers == whole.stats.barriers);
    require_no_validation_messages();
}

TEST_CASE("a step that fails after some of its parts were submitted leaves the backend usable",
          "[vulkan][parts][model][golden]") {
    const ScopedEnv env("STRATA_VK_SUBMIT", "1,1");
    const auto model = load_model(golden_hf_dir());
    const std::vector<int32_t> tokens = expected()["prompts"]["short"]["tokens"].get<std::vector<int32_t>>();
    auto gpu = make_vulkan();
    gpu->load(*model);
    Transformer tf(*model, *gpu);
    KVCache cache(*gpu, model->config, 32);
    const Trace before = tf.prefill(cache, tokens, TraceRequest{});
    // A step with parts in flight, then misuse: a range outside its buffer.
    const int64_t dim = model->config.dim;
    Buf a = gpu->alloc(dim, "a"), b = gpu->alloc(dim, "b");
    gpu->begin();
    for (int i = 0; i < 6; ++i) gpu->add(a, a, b, dim);
    CHECK_THROWS_AS(gpu->add(a, a, b.at(0, 4 * dim), 4 * dim), Error);
    // The next pass begins (waiting for the parts left running) and gives what it gave before.
    cache.truncate(0);
    const Trace again = tf.prefill(cache, tokens, TraceRequest{});
    CHECK(again.last_logits == before.last_logits);
    require_no_validation_messages();
}
