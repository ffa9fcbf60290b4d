// Interventions on the Vulkan backend: every kind of ablation, patching, the patching sweep and attribution give
// what the CPU backend gives on the golden model (the engine tests check the CPU against independent
// computations), with the validation layer silent.
#include <algorithm>

#include "strata/causal.hpp"
#include "strata/intervention.hpp"
#include "strata/transformer.hpp"
#include "vk_helpers.hpp"

using namespace strata;
using namespace strata::test;

namespace {

struct Both {
    std::unique_ptr<Model> model = load_model(golden_hf_dir());
    std::unique_ptr<Backend> cpu = make_cpu(), vulkan = make_vulkan();
    Both() {
        cpu->load(*model);
        vulkan->load(*model);
    }
};

Both& both() {
    static Both b;
    return b;
}

Trace run(Backend& b, std::span<const int32_t> tokens, TraceRequest r) {
    Transformer tf(*both().model, b);
    KVCache cache(b, both().model->config, static_cast<int64_t>(tokens.size()));
    r.logits_all_positions = true;
    r.keep_logits = true;
    r.all = true;
    return tf.prefill(cache, tokens, r);
}

std::vector<int32_t> prompt() { return expected()["prompts"]["short"]["tokens"].get<std::vector<int32_t>>(); }

}  // namespace

TEST_CASE("ablations and patches on Vulkan equal the CPU backend's", "[vulkan][interventions]") {
    Both& b = both();
    const ModelConfig& c = b.model->config;
    const auto tokens = prompt();
    const Trace donor = run(*b.cpu, std::span<const int32_t>(tokens).first(6), {});
    TraceRequest mean_src;
    const Trace clean = run(*b.cpu, tokens, mean_src);

    for (const char* specs : {"layers.1.attention.heads.0", "layers.0.attention,layers.2.feed_forward",
                              "layers.1", "layers.2.feed_forward.neurons.5,layers.0.attention.heads.1"}) {
        INFO(specs);
        TraceRequest r;
        r.interventions = parse_ablations(specs, c);
        const Trace on_cpu = run(*b.cpu, tokens, r), on_vk = run(*b.vulkan, tokens, r);
        require_no_validation_messages();
        CHECK(rel_l2(on_vk.find("logits")->data, on_cpu.find("logits")->data) < 1e-5);
        for (const Intervention& iv : r.interventions)
            CHECK(rel_l2(on_vk.find(iv.site)->data, on_cpu.find(iv.site)->data) < 1e-5);
    }
    TraceRequest mixed;
    mixed.interventions = {mean_ablation(parse_ablation("layers.0.attention.heads.1", c)[0], clean),
                           patch_from(donor, PatchSpec{"h.1", 3}), patch_from(donor, PatchSpec{"layers.2.attention_out", 5})};
    const Trace on_cpu = run(*b.cpu, tokens, mixed), on_vk = run(*b.vulkan, tokens, mixed);
    require_no_validation_messages();
    CHECK(rel_l2(on_vk.find("logits")->data, on_cpu.find("logits")->data) < 1e-5);
    CHECK(rel_l2(on_vk.find("layers.0.attention.heads")->data, on_cpu.find("layers.0.attention.heads")->data) < 1e-5);

    // Through decode too: the ablation holds at every new position.
    Transformer tf(*b.model, *b.vulkan);
    KVCache cache(*b.vulkan, c, static_cast<int64_t>(tokens.size()));
    TraceRequest r;
    r.interventions = parse_ablations("layers.1.attention.heads.1", c);
    tf.prefill(cache, std::span<const int32_t>(tokens).first(tokens.size() - 1), r);
    const Trace last = tf.decode(cache, tokens.back(), r);
    require_no_validation_messages();
    const Trace full = run(*b.cpu, tokens, r);
    const int64_t V = c.vocab_size, T = static_cast<int64_t>(tokens.size());
    CHECK(rel_l2(last.last_logits, std::span<const float>(full.find("logits")->data).subspan(size_t((T - 1) * V))) <
          1e-5);
}

TEST_CASE("a patch of a block's output reaches the next norm on the fused path too", "[vulkan][interventions]") {
    // Without a trace that keeps everything, w2's product carries the next norm (matmul_add_rmsnorm) unless an
    // intervention changes the block's output h.L first. A short prompt (one pass of the matvec) and a decode
    // step, each with h.L patched from another prompt, on Vulkan and on the CPU backend, against the CPU backend
    // keeping everything (the unfused pass: the norm then runs after the patch, as model.py would see it).
    Both& b = both();
    const ModelConfig& c = b.model->config;
    const auto tokens = prompt();
    std::vector<int32_t> other(tokens.begin(), tokens.begin() + 6);  // the donor: another prompt
    std::reverse(other.begin(), other.end());
    const Trace donor = run(*b.cpu, other, {});
    auto logits = [&](Backend& be, const char* site, int64_t pos, bool keep_all) {
        Transformer tf(*b.model, be);
        KVCache cache(be, c, 8);
        TraceRequest r;
        r.all = keep_all;
        r.interventions = {patch_from(donor, PatchSpec{site, pos})};
        const Trace prompt_trace = tf.prefill(cache, std::span<const int32_t>(tokens).first(5), r);
        const Trace step = tf.decode(cache, tokens[5], r);
        std::vector<float> out = prompt_trace.last_logits;
        out.insert(out.end(), step.last_logits.begin(), step.last_logits.end());
        return out;
    };
    for (const auto& [site, pos] : {std::pair{"h.0", 4}, std::pair{"h.1", 5}, std::pair{"h.2", 4}}) {
        INFO(site << " at " << pos);
        const std::vector<float> want = logits(*b.cpu, site, pos, true);
        const std::vector<float> unpatched = [&] {
            Transformer tf(*b.model, *b.cpu);
            KVCache cache(*b.cpu, c, 8);
            std::vector<float> out = tf.prefill(cache, std::span<const int32_t>(tokens).first(5), {}).last_logits;
            const std::vector<float> step = tf.decode(cache, tokens[5], {}).last_logits;
            out.insert(out.end(), step.begin(), step.end());
            return out;
        }();
        REQUIRE(rel_l2(want, unpatched) > 1e-3);  // the patch changes what the model says
        CHECK(rel_l2(logits(*b.cpu, site, pos, false), want) < 1e-6);
        CHECK(rel_l2(logits(*b.vulkan, site, pos, false), want) < 1e-5);
        require_no_validation_messages();
    }
}

TEST_CASE("the patching sweep and attribution on Vulkan equal the CPU backend's", "[vulkan][interventions]") {
    Both& b = both();
    auto clean = prompt();
    clean.resize(8);
    std::vector<int32_t> corrupt = clean;
    corrupt[4] = 12345;
    Transformer on_cpu(*b.model, *b.cpu), on_vk(*b.model, *b.vulkan);
    const PatchSweep a = patch_sweep(on_cpu, clean, corrupt, 1000, 2000), v = patch_sweep(on_vk, clean, corrupt, 1000, 2000);
    require_no_validation_messages();
    CHECK(v.clean == Approx(a.clean).margin(1e-4));
    CHECK(v.corrupt == Approx(a.corrupt).margin(1e-4));
    for (size_t L = 0; L < a.effect.size(); ++L)
        for (size_t p = 0; p < a.effect[L].size(); ++p) CHECK(v.effect[L][p] == Approx(a.effect[L][p]).margin(1e-4));

    const Attribution x = attribute(on_cpu, clean, 1000), y = attribute(on_vk, clean, 1000);
    require_no_validation_messages();
    CHECK(y.logit == Approx(x.logit).margin(1e-4));
    REQUIRE(y.components.size() == x.components.size());
    for (size_t i = 0; i < x.components.size(); ++i) CHECK(y.components[i].value == Approx(x.components[i].value).margin(1e-4));
}
