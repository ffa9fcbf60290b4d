// Interventions, patching and attribution, each checked against a computation that does not go through the
// intervention mechanism: weight surgery on a second copy of the golden model (zeroed columns of wo or w2, a
// model without the block), donor rows read back from the trace, the linearity of wo.
#include <cmath>
#include <functional>

#include <nlohmann/json.hpp>

#include "catch.hpp"
#include "strata/backend.hpp"
#include "strata/causal.hpp"
#include "strata/error.hpp"
#include "strata/intervention.hpp"
#include "strata/model.hpp"
#include "strata/transformer.hpp"
#include "support.hpp"

using namespace strata;
using Catch::Contains;

namespace {

std::vector<int32_t> short_prompt() {
    return test::expected()["prompts"]["short"]["tokens"].get<std::vector<int32_t>>();
}

// The golden model on the CPU backend, after `edit` changed its weights or layers (bytes the test owns).
struct Golden {
    std::unique_ptr<Model> model;
    std::unique_ptr<Backend> backend;
    std::vector<std::vector<std::byte>> owned;

    explicit Golden(const std::function<void(Golden&)>& edit = {}) {
        model = load_model(test::golden_hf_dir());
        if (edit) edit(*this);
        backend = make_backend(BackendOptions{});
        backend->load(*model);
    }
    // Zeroes columns [c0, c0 + n) of every row of a float weight.
    void zero_columns(const std::string& name, int64_t c0, int64_t n) {
        TensorView& t = model->tensors.at(name);
        const uint64_t es = dtype_bytes(t.dtype, 1);
        std::vector<std::byte>& bytes = owned.emplace_back(t.data, t.data + t.nbytes);
        for (int64_t r = 0; r < t.rows(); ++r)
            std::fill_n(bytes.data() + (r * t.cols() + c0) * es, n * es, std::byte{0});
        t.data = bytes.data();
    }
    // The model without block `skip`: later blocks move down one index.
    void drop_layer(int64_t skip) {
        const int64_t n = model->config.n_layers;
        std::map<std::string, TensorView> kept;
        for (auto& [name, t] : model->tensors) {
            if (name.rfind("layers.", 0) != 0) {
                kept.emplace(name, t);
                continue;
            }
            const size_t dot = name.find('.', 7);
            const int64_t L = std::stoll(name.substr(7, dot - 7));
            if (L == skip) continue;
            kept.emplace("layers." + std::to_string(L > skip ? L - 1 : L) + name.substr(dot), t);
        }
        model->tensors = std::move(kept);
        model->config.n_layers = n - 1;
    }

    Trace run(std::span<const int32_t> tokens, TraceRequest r = {}) {
        Transformer tf(*model, *backend);
        KVCache cache(*backend, model->config, static_cast<int64_t>(tokens.size()));
        r.logits_all_positions = true;
        r.keep_logits = true;
        return tf.prefill(cache, tokens, r);
    }
};

Golden& plain() {
    static Golden g;
    return g;
}

TraceRequest ablating(const std::string& specs) {
    TraceRequest r;
    r.all = true;
    r.interventions = parse_ablations(specs, plain().model->config);
    return r;
}

const std::vector<float>& logits(const Trace& t) { return t.find("logits")->data; }

std::span<const float> row(const Trace& t, const std::string& name, int64_t r) {
    const TracedTensor& x = *t.find(name);
    return std::span<const float>(x.data).subspan(static_cast<size_t>(r * x.cols), static_cast<size_t>(x.cols));
}

}  // namespace

TEST_CASE("ablation specs parse into sites and columns, and bad ones are errors naming them", "[interventions]") {
    const ModelConfig& c = plain().model->config;  // 3 layers, 2 query heads of 64, hidden_dim 448
    auto one = [&](const std::string& s) {
        const Interventions v = parse_ablation(s, c);
        REQUIRE(v.size() == 1);
        return v[0];
    };
    const Intervention head = one("layers.1.attention.heads.1");
    CHECK(head.site == "layers.1.attention.heads");
    CHECK(head.col0 == 64);
    CHECK(head.cols == 64);
    CHECK(head.position == -1);
    CHECK(one("layers.2.attention").site == "layers.2.attention_out");
    CHECK(one("layers.0.feed_forward").site == "layers.0.ffn_out");
    const Intervention neuron = one("layers.0.feed_forward.neurons.7");
    CHECK(neuron.site == "layers.0.ffn_hidden");
    CHECK((neuron.col0 == 7 && neuron.cols == 1));
    const Interventions block = parse_ablation("layers.2", c);
    REQUIRE(block.size() == 2);
    CHECK(block[0].site == "layers.2.attention_out");
    CHECK(block[1].site == "layers.2.ffn_out");
    CHECK(parse_ablations("layers.0.attention,layers.1.attention.heads.0", c).size() == 2);

    auto error = [&](const std::string& s) {
        try {
            parse_ablations(s, c);
        } catch (const InputError& e) {
            return std::string(e.what());
        }
        FAIL("no error for " << s);
        return std::string();
    };
    CHECK_THAT(error("layers.3"), Contains("layers 0..2"));
    CHECK_THAT(error("layers.0.attention.heads.2"), Contains("heads 0..1"));
    CHECK_THAT(error("layers.0.feed_forward.neurons.448"), Contains("0..447"));
    CHECK_THAT(error("layers.x.attention"), Contains("layers.x.attention"));
    CHECK_THAT(error("layers.0.attention.heads.-1"), Contains("-1"));
    CHECK_THAT(error("layers.0.mlp"), Contains("layers.0.mlp"));
    CHECK_THAT(error("layers.0,,layers.1"), Contains("empty"));
    CHECK_THAT(error("layers.99999999999999999999"), Contains("layers.99999999999999999999"));

    CHECK(parse_patch("h.2@5", c).site == "h.2");
    CHECK(parse_patch("layers.1.attention_out@0", c).position == 0);
    CHECK_THROWS_WITH(parse_patch("h.3@1", c), Contains("h.3"));
    CHECK_THROWS_WITH(parse_patch("h.1", c), Contains("SITE@POS"));
    CHECK_THROWS_WITH(parse_patch("layers.1.ffn_hidden@2", c), Contains("layers.1.ffn_hidden@2"));
    CHECK_THROWS_WITH(parse_patch("h.1@x", c), Contains("'x'"));
    CHECK_THROWS_WITH(parse_patch_site_kind("resid"), Contains("resid"));
}

TEST_CASE("zeroing a head is zeroing its columns of wo; a branch is zeroing wo or w2", "[interventions]") {
    const auto tokens = short_prompt();
    const Trace ablated = plain().run(tokens, ablating("layers.1.attention.heads.1"));
    // The head's columns of the traced attention output are zero, the other head's are not.
    const TracedTensor& z = *ablated.find("layers.1.attention.heads");
    for (int64_t t = 0; t < z.rows; ++t)
        for (int64_t j = 64; j < 128; ++j) REQUIRE(z.data[static_cast<size_t>(t * z.cols + j)] == 0.0f);
    CHECK(z.data[5] != 0.0f);

    Golden surgery([](Golden& g) { g.zero_columns("layers.1.attention.wo", 64, 64); });
    const Trace reference = surgery.run(tokens);
    CHECK(test::rel_l2(logits(ablated), logits(reference)) < 1e-6);
    CHECK(test::rel_l2(logits(ablated), logits(plain().run(tokens))) > 1e-3);  // it did change something

    Golden no_attention([](Golden& g) { g.zero_columns("layers.0.attention.wo", 0, 128); });
    CHECK(test::rel_l2(logits(plain().run(tokens, ablating("layers.0.attention"))), logits(no_attention.run(tokens))) <
          1e-6);
    Golden no_ffn([](Golden& g) { g.zero_columns("layers.2.feed_forward.w2", 0, 448); });
    CHECK(test::rel_l2(logits(plain().run(tokens, ablating("layers.2.feed_forward"))), logits(no_ffn.run(tokens))) <
          1e-6);
}

TEST_CASE("zeroing a neuron is zeroing its column of w2", "[interventions]") {
    const auto tokens = short_prompt();
    const Trace ablated = plain().run(tokens, ablating("layers.0.feed_forward.neurons.17"));
    const TracedTensor& hidden = *ablated.find("layers.0.ffn_hidden");
    for (int64_t t = 0; t < hidden.rows; ++t) REQUIRE(hidden.data[static_cast<size_t>(t * hidden.cols + 17)] == 0.0f);
    Golden surgery([](Golden& g) { g.zero_columns("layers.0.feed_forward.w2", 17, 1); });
    CHECK(test::rel_l2(logits(ablated), logits(surgery.run(tokens))) < 1e-6);
}

TEST_CASE("skipping a block equals the model without that block", "[interventions]") {
    const auto tokens = short_prompt();
    for (int64_t skip : {0, 1, 2}) {
        INFO("block " << skip);
        const Trace ablated = plain().run(tokens, ablating("layers." + std::to_string(skip)));
        Golden without([&](Golden& g) { g.drop_layer(skip); });
        const Trace reference = without.run(tokens);
        CHECK(test::rel_l2(logits(ablated), logits(reference)) < 1e-6);
        // The block's output is its input, exactly.
        const std::string in = skip == 0 ? "x0" : "h." + std::to_string(skip - 1);
        CHECK(test::rel_l2(ablated.find("h." + std::to_string(skip))->data, ablated.find(in)->data) == 0.0);
    }
}

TEST_CASE("mean ablation puts the mean over the prompt's positions at every position", "[interventions]") {
    const auto tokens = short_prompt();
    TraceRequest all;
    all.all = true;
    const Trace clean = plain().run(tokens, all);
    const Intervention zero = parse_ablation("layers.1.attention.heads.0", plain().model->config)[0];
    const Intervention mean = mean_ablation(zero, clean);
    REQUIRE(mean.values.size() == 64);
    const TracedTensor& z = *clean.find("layers.1.attention.heads");
    double m = 0;
    for (int64_t t = 0; t < z.rows; ++t) m += z.data[static_cast<size_t>(t * z.cols + 3)];
    CHECK(mean.values[3] == Approx(m / double(z.rows)).epsilon(1e-5));

    TraceRequest r = all;
    r.interventions = {mean};
    const Trace t = plain().run(tokens, r);
    for (int64_t p = 0; p < z.rows; ++p) {
        const auto zr = row(t, "layers.1.attention.heads", p);
        for (int64_t j = 0; j < 64; ++j) REQUIRE(zr[size_t(j)] == mean.values[size_t(j)]);
        CHECK(zr[64] == z.data[static_cast<size_t>(p * z.cols + 64)]);  // the other head untouched
    }
}

TEST_CASE("patching from the same prompt changes nothing; the last final residual gives the donor's logits",
          "[interventions]") {
    const auto tokens = short_prompt();
    const auto T = static_cast<int64_t>(tokens.size());
    const ModelConfig& c = plain().model->config;
    TraceRequest all;
    all.all = true;
    const Trace clean = plain().run(tokens, all);

    TraceRequest same;
    for (const char* site : {"h.0", "layers.1.attention_out", "layers.2.ffn_out"})
        for (int64_t p : {int64_t(0), T / 2, T - 1}) same.interventions.push_back(patch_from(clean, PatchSpec{site, p}));
    CHECK(test::rel_l2(logits(plain().run(tokens, same)), logits(clean)) == 0.0);

    // A corrupt prompt: the same length, other tokens from position 2 on.
    std::vector<int32_t> corrupt = tokens;
    for (int64_t p = 2; p < T; ++p) corrupt[size_t(p)] = 1000 + int32_t(p);
    const Trace plain_corrupt = plain().run(corrupt);
    TraceRequest last;
    last.interventions = {patch_from(clean, PatchSpec{"h." + std::to_string(c.n_layers - 1), T - 1})};
    const Trace patched = plain().run(corrupt, last);
    const int64_t V = c.vocab_size;
    const auto clean_last = std::span<const float>(logits(clean)).subspan(size_t((T - 1) * V), size_t(V));
    const auto patched_last = std::span<const float>(logits(patched)).subspan(size_t((T - 1) * V), size_t(V));
    const auto corrupt_before = std::span<const float>(logits(plain_corrupt)).subspan(0, size_t((T - 1) * V));
    CHECK(test::rel_l2(patched_last, clean_last) < 1e-6);
    // Positions before the patched one are the corrupt run's.
    CHECK(test::rel_l2(std::span<const float>(logits(patched)).subspan(0, size_t((T - 1) * V)), corrupt_before) == 0.0);

    // A donor that does not reach the position is an error naming it.
    const Trace short_donor = plain().run(std::span<const int32_t>(tokens).first(3), all);
    CHECK_THROWS_WITH(patch_from(short_donor, PatchSpec{"h.1", 5}), Contains("h.1@5") && Contains("0..2"));
    TraceRequest bad;
    bad.interventions = {Intervention{"h.1", 0, 64, -1, std::vector<float>(3), "x"}};
    CHECK_THROWS_AS(plain().run(tokens, bad), InputError);
}

TEST_CASE("the patching sweep equals one patched run per cell and ends at the clean metric", "[interventions]") {
    const auto clean = short_prompt();
    const auto T = static_cast<int64_t>(clean.size());
    std::vector<int32_t> corrupt = clean;
    corrupt[3] = 12345;  // one token differs
    Golden& g = plain();
    const ModelConfig& c = g.model->config;
    const Trace clean_run = g.run(clean);
    // Answer: the clean run's top token at the last position; foil: the corrupt run's.
    const int32_t answer = clean_run.top_k.back()[0].id;
    const int32_t corrupt_top = g.run(corrupt).top_k.back()[0].id;
    const int32_t foil = corrupt_top == answer ? clean_run.top_k.back()[1].id : corrupt_top;

    for (PatchSite site : {PatchSite::Residual, PatchSite::AttentionOut}) {
        Transformer tf(*g.model, *g.backend);
        int64_t calls = 0;
        PatchSweepOptions o;
        o.site = site;
        o.progress = [&](int64_t done, int64_t total) {
            CHECK(total == c.n_layers * T);
            calls = done;
            return true;
        };
        const PatchSweep s = patch_sweep(tf, clean, corrupt, answer, foil, o);
        CHECK(calls == c.n_layers * T);
        REQUIRE(s.effect.size() == size_t(c.n_layers));
        REQUIRE(s.effect[0].size() == size_t(T));
        auto metric = [&](const Trace& t) {
            const int64_t V = c.vocab_size;
            const float* last = logits(t).data() + (T - 1) * V;
            return double(last[answer]) - double(last[foil]);
        };
        CHECK(s.clean == Approx(metric(clean_run)).margin(1e-5));
        CHECK(s.corrupt == Approx(metric(g.run(corrupt))).margin(1e-5));
        TraceRequest keep;
        keep.all = true;
        const Trace donor = g.run(clean, keep);
        for (int64_t L = 0; L < c.n_layers; ++L)
            for (int64_t p = 0; p < T; ++p) {
                INFO("layer " << L << " position " << p);
                TraceRequest r;
                r.interventions = {patch_from(donor, PatchSpec{patch_site_name(site, L), p})};
                CHECK(s.effect[size_t(L)][size_t(p)] == Approx(metric(g.run(corrupt, r))).margin(1e-4));
                // Before the differing token the two prompts' activations are the same: no effect.
                if (p < 3) CHECK(s.effect[size_t(L)][size_t(p)] == Approx(s.corrupt).margin(1e-4));
            }
        if (site == PatchSite::Residual) {
            // The last block's output at the last position is everything the logits see.
            CHECK(s.effect[size_t(c.n_layers - 1)][size_t(T - 1)] == Approx(s.clean).margin(1e-4));
        }
    }

    Transformer tf(*g.model, *g.backend);
    CHECK_THROWS_WITH(patch_sweep(tf, clean, std::span<const int32_t>(corrupt).first(3), answer, foil),
                      Contains("same length"));
    CHECK_THROWS_WITH(patch_sweep(tf, clean, corrupt, int32_t(c.vocab_size), foil), Contains("answer"));
    PatchSweepOptions stop;
    stop.progress = [&](int64_t done, int64_t) { return done < 2; };
    CHECK_THROWS_AS(patch_sweep(tf, clean, corrupt, answer, foil, stop), Cancelled);
}

TEST_CASE("direct logit attribution: components sum to the logit, and a head's is what it adds through wo",
          "[interventions]") {
    const auto tokens = short_prompt();
    const auto T = static_cast<int64_t>(tokens.size());
    Golden& g = plain();
    const ModelConfig& c = g.model->config;
    TraceRequest all;
    all.all = true;
    const Trace clean = g.run(tokens, all);

    for (int64_t P : {T - 1, int64_t(4)}) {
        INFO("position " << P);
        const int32_t target = clean.top_k[size_t(P)][1].id;  // the runner-up token
        Transformer tf(*g.model, *g.backend);
        const Attribution a = attribute(tf, tokens, target, P == T - 1 ? -1 : P);
        CHECK(a.position == P);
        REQUIRE(a.components.size() == size_t(1 + c.n_layers * (c.n_heads + 1)));
        CHECK(a.components[0].name == "x0");
        CHECK(a.components[1].name == "layers.0.attention.heads.0");
        CHECK(a.components[3].name == "layers.0.feed_forward");
        // The logit is the model's own.
        CHECK(a.logit == Approx(logits(clean)[size_t(P * c.vocab_size + target)]).margin(1e-5));
        double sum = 0, mag = 0;
        for (const auto& comp : a.components) sum += comp.value, mag += std::abs(comp.value);
        CHECK(std::abs(sum - a.logit) <= 1e-4 * mag);

        // Independently: u = scale * norm.weight * output[target]; head H of layer L adds
        // attention_out(all heads) - attention_out(head H ablated) to the residual (wo is linear).
        const auto h = row(clean, "h." + std::to_string(c.n_layers - 1), P);
        double ss = 0;
        for (float v : h) ss += double(v) * v;
        const double scale = 1.0 / std::sqrt(ss / double(c.dim) + double(c.norm_eps));
        CHECK(a.scale == Approx(scale).epsilon(1e-6));  // the engine runs the prompt up to P only
        const std::vector<float> gain = g.model->tensor("norm").to_f32();
        std::vector<float> out(static_cast<size_t>(c.dim));
        g.model->output_weight().row_to_f32(target, out.data());
        auto dla = [&](std::span<const float> v) {
            double s = 0;
            for (int64_t i = 0; i < c.dim; ++i) s += scale * gain[size_t(i)] * out[size_t(i)] * double(v[size_t(i)]);
            return s;
        };
        CHECK(a.components[0].value == Approx(dla(row(clean, "x0", P))).margin(1e-6));
        for (int64_t L = 0; L < c.n_layers; ++L) {
            const std::string layer = "layers." + std::to_string(L);
            for (int64_t H = 0; H < c.n_heads; ++H) {
                const Trace without = g.run(tokens, ablating(layer + ".attention.heads." + std::to_string(H)));
                const auto full = row(clean, layer + ".attention_out", P);
                const auto rest = row(without, layer + ".attention_out", P);
                std::vector<float> delta(full.size());
                for (size_t i = 0; i < delta.size(); ++i) delta[i] = full[i] - rest[i];
                const auto& comp = a.components[size_t(1 + L * (c.n_heads + 1) + H)];
                CHECK(comp.name == layer + ".attention.heads." + std::to_string(H));
                CHECK(comp.value == Approx(dla(delta)).margin(1e-4 * mag));
            }
            CHECK(a.components[size_t(1 + L * (c.n_heads + 1) + c.n_heads)].value ==
                  Approx(dla(row(clean, layer + ".ffn_out", P))).margin(1e-6));
        }
    }
    Transformer tf(*g.model, *g.backend);
    CHECK_THROWS_WITH(attribute(tf, tokens, int32_t(c.vocab_size), -1), Contains("target"));
    CHECK_THROWS_WITH(attribute(tf, tokens, 5, T), Contains("position " + std::to_string(T)));
}

TEST_CASE("interventions stay in force through decode, at the positions they name", "[interventions]") {
    const auto tokens = short_prompt();
    const auto T = static_cast<int64_t>(tokens.size());
    Golden& g = plain();
    TraceRequest r = ablating("layers.0.attention.heads.1,layers.2.feed_forward.neurons.3");
    const Trace pre = g.run(tokens, r);
    Transformer tf(*g.model, *g.backend);
    KVCache cache(*g.backend, g.model->config, T);
    r.all = false;
    tf.prefill(cache, std::span<const int32_t>(tokens).first(size_t(T - 2)), r);
    tf.decode(cache, tokens[size_t(T - 2)], r);
    const Trace last = tf.decode(cache, tokens[size_t(T - 1)], r);
    const int64_t V = g.model->config.vocab_size;
    CHECK(test::rel_l2(last.last_logits, std::span<const float>(logits(pre)).subspan(size_t((T - 1) * V), size_t(V))) <
          1e-5);
}

// ---------------------------------------------------------------------------------------------- strata-cli

TEST_CASE("strata-cli forward --ablate and --patch, patch and attribute, as the contract says", "[interventions][cli]") {
    const auto tokens = short_prompt();
    const auto T = static_cast<int64_t>(tokens.size());
    const std::string model = " --model " + test::quote(test::golden_hf_dir().string());
    const std::string ids = test::ids_arg(tokens);

    // --ablate: the top-k of the intervened pass, the same as the engine's.
    const auto r = test::run_cli("forward" + model + " --tokens " + ids + " --top-k 3 --ablate layers.1.attention.heads.1,layers.0");
    INFO(r.err);
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    const Trace ablated = plain().run(tokens, ablating("layers.1.attention.heads.1,layers.0"));
    for (int64_t p = 0; p < T; ++p)
        CHECK(j["positions"][size_t(p)]["top_k"][0]["id"].get<int32_t>() == ablated.top_k[size_t(p)][0].id);
    CHECK(j["positions"][size_t(T - 1)]["top_k"][0]["logit"].get<double>() ==
          Approx(ablated.top_k[size_t(T - 1)][0].logit).margin(1e-5));
    CHECK(j["interventions"].size() == 3);

    // --patch from another prompt (a different length is fine where the position exists in both).
    std::vector<int32_t> donor(tokens.begin(), tokens.begin() + 5);
    donor[2] = 4321;
    const auto pr = test::run_cli("forward" + model + " --tokens " + ids + " --patch h.1@2,layers.2.ffn_out@4 --patch-from-tokens " +
                                  test::ids_arg(donor));
    INFO(pr.err);
    REQUIRE(pr.status == 0);
    TraceRequest keep;
    keep.all = true;
    const Trace donor_trace = plain().run(donor, keep);
    TraceRequest pr_req;
    pr_req.interventions = {patch_from(donor_trace, PatchSpec{"h.1", 2}),
                            patch_from(donor_trace, PatchSpec{"layers.2.ffn_out", 4})};
    const Trace patched = plain().run(tokens, pr_req);
    const auto pj = nlohmann::json::parse(pr.out);
    CHECK(pj["positions"][size_t(T - 1)]["top_k"][0]["logit"].get<double>() ==
          Approx(patched.top_k[size_t(T - 1)][0].logit).margin(1e-5));
    // A position the donor lacks, and one the prompt lacks, are errors naming them.
    auto fails = [&](const std::string& args, const std::string& needle) {
        const auto f = test::run_cli(args);
        INFO(args << "\n" << f.err);
        CHECK(f.status != 0);
        CHECK_THAT(f.err, Contains(needle));
        CHECK(f.out.empty());
    };
    fails("forward" + model + " --tokens " + ids + " --patch h.1@7 --patch-from-tokens " + test::ids_arg(donor), "h.1@7");
    fails("forward" + model + " --tokens " + test::ids_arg(donor) + " --patch h.1@6 --patch-from-tokens " + ids, "h.1@6");
    fails("forward" + model + " --tokens " + ids + " --patch h.1@2", "--patch-from-tokens");
    fails("forward" + model + " --tokens " + ids + " --ablate layers.7", "layers.7");
    fails("forward" + model + " --tokens " + ids + " --ablate layers.0.attention.heads.9", "layers.0.attention.heads.9");
    fails("forward" + model + " --tokens " + ids + " --patch q.1@2 --patch-from-text hi", "q.1@2");

    // patch: {"clean", "corrupt", "effect": n_layers x T}.
    std::vector<int32_t> corrupt = tokens;
    corrupt[3] = 12345;
    const auto sw = test::run_cli("patch" + model + " --clean-tokens " + ids + " --corrupt-tokens " +
                                  test::ids_arg(corrupt) + " --answer 1000 --foil 2000 --site attention_out");
    INFO(sw.err);
    REQUIRE(sw.status == 0);
    const auto sj = nlohmann::json::parse(sw.out);
    REQUIRE(sj["effect"].size() == 3);
    REQUIRE(sj["effect"][0].size() == size_t(T));
    Transformer tf(*plain().model, *plain().backend);
    PatchSweepOptions o;
    o.site = PatchSite::AttentionOut;
    const PatchSweep s = patch_sweep(tf, tokens, corrupt, 1000, 2000, o);
    CHECK(sj["clean"].get<double>() == Approx(s.clean).margin(1e-6));
    CHECK(sj["corrupt"].get<double>() == Approx(s.corrupt).margin(1e-6));
    CHECK(sj["effect"][2][size_t(T - 1)].get<double>() == Approx(s.effect[2][size_t(T - 1)]).margin(1e-6));
    fails("patch" + model + " --clean-tokens " + ids + " --corrupt-tokens 128000,1 --answer 1 --foil 2", "same length");
    fails("patch" + model + " --clean-tokens " + ids + " --corrupt-tokens " + ids + " --answer 1 --foil 999999", "999999");
    fails("patch" + model + " --clean-tokens " + ids + " --corrupt-tokens " + ids + " --answer 1 --foil 2 --site mlp", "mlp");

    // attribute: {"logit", "components"} summing to the logit.
    const auto at = test::run_cli("attribute" + model + " --tokens " + ids + " --target 1000 --position 4");
    INFO(at.err);
    REQUIRE(at.status == 0);
    const auto aj = nlohmann::json::parse(at.out);
    double sum = 0, mag = 0;
    for (const auto& comp : aj["components"]) sum += comp["value"].get<double>(), mag += std::abs(comp["value"].get<double>());
    CHECK(std::abs(sum - aj["logit"].get<double>()) <= 1e-4 * mag);
    CHECK(aj["components"].size() == 1 + 3 * 3);
    CHECK(aj["components"][1]["name"] == "layers.0.attention.heads.0");
    fails("attribute" + model + " --tokens " + ids + " --target 1000 --position " + std::to_string(T), "position");
    fails("attribute" + model + " --tokens " + ids + " --target -5", "-5");
}
