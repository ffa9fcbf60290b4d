// The logit lens and the logits of a position, against the model's own forward pass (demonstration model, CPU):
// the lens's last row is the model's logits; a position's logits come from the trace when kept, else from the
// final norm row; and the lens summaries on hand-made rows.
#include <cmath>
#include <memory>
#include <random>

#include "catch.hpp"
#include "logits/lens.hpp"
#include "strata/backend.hpp"
#include "strata/model.hpp"
#include "strata/transformer.hpp"
#include "ui_support.hpp"

using namespace strata;
using namespace strata::ui;

namespace {

struct Demo {
    std::unique_ptr<Model> model;
    std::unique_ptr<Backend> backend;
    std::unique_ptr<Transformer> transformer;
};

Demo& demo() {
    static Demo d = [] {
        Demo x;
        x.model = load_model(test::demo_model());
        BackendOptions o;
        o.name = "cpu";
        x.backend = make_backend(o);
        x.backend->load(*x.model);
        x.transformer = std::make_unique<Transformer>(*x.model, *x.backend);
        return x;
    }();
    return d;
}

// The explorer's run: every tensor, and the logits of every position.
Trace run(const std::vector<int32_t>& tokens, bool keepLogits) {
    TraceRequest r;
    r.all = true;
    r.logits_all_positions = keepLogits;
    r.keep_logits = keepLogits;
    KVCache cache(*demo().backend, demo().model->config, int64_t(tokens.size()));
    return demo().transformer->prefill(cache, tokens, r);
}

std::span<const float> row(const std::vector<float>& m, int64_t r, int64_t n) {
    return std::span<const float>(m).subspan(size_t(r * n), size_t(n));
}

}  // namespace

TEST_CASE("the logit lens of the last block is the model's own logits", "[logits]") {
    const std::vector<int32_t> tokens = demo().model->tokenizer.encode("The capital of France is Paris, and");
    std::vector<int32_t> seq{128000};
    seq.insert(seq.end(), tokens.begin(), tokens.end());
    const Trace t = run(seq, true);
    const TracedTensor* logits = t.find("logits");
    REQUIRE(logits);
    const int64_t V = logits->cols, L = demo().model->config.n_layers;
    for (int64_t p : {int64_t(0), int64_t(seq.size() / 2), int64_t(seq.size() - 1)}) {
        INFO("position " << p);
        const std::vector<float> lens = lens::logit_lens(*demo().transformer, t, p);
        REQUIRE(lens.size() == size_t((L + 1) * V));
        CHECK(test::rel_l2(row(lens, L, V), row(logits->data, p, V)) < 1e-5);
        CHECK(test::all_finite(lens));
        // The earlier rows are other predictions: the embedding's row differs from the final one.
        CHECK(test::rel_l2(row(lens, 0, V), row(logits->data, p, V)) > 1e-2);
        // The logits of the position, straight from the trace.
        CHECK(lens::logits_at(*demo().model, t, p) == std::vector<float>(row(logits->data, p, V).begin(), row(logits->data, p, V).end()));
    }
}

TEST_CASE("a position's logits come from the final norm row when the run kept only the last logits", "[logits]") {
    const std::vector<int32_t> seq{128000, 791, 6864, 315, 9822, 374};
    const Trace full = run(seq, true);
    const Trace lean = run(seq, false);
    REQUIRE(lean.find("logits"));
    REQUIRE(lean.find("logits")->rows == 1);  // the last position's only
    Trace dropped = full;                      // as the explorer keeps a long prompt: no logits at all
    dropped.tensors.erase("logits");
    const TracedTensor* logits = full.find("logits");
    for (int64_t p = 0; p < int64_t(seq.size()); ++p) {
        INFO("position " << p);
        const std::span<const float> want = row(logits->data, p, logits->cols);
        CHECK(test::rel_l2(lens::logits_at(*demo().model, lean, p), want) < 1e-5);
        CHECK(test::rel_l2(lens::logits_at(*demo().model, dropped, p), want) < 1e-5);
    }
    CHECK_THROWS(lens::logits_at(*demo().model, lean, int64_t(seq.size())));
    CHECK_THROWS(lens::logit_lens(*demo().transformer, lean, -1));
}

TEST_CASE("project_rows is every row of x against every row of w", "[logits]") {
    std::mt19937 rng(5);
    std::normal_distribution<float> n(0.0f, 1.0f);
    const int64_t V = 3001, D = 37, R = 3;
    std::vector<float> w(size_t(V * D)), x(size_t(R * D));
    for (float& v : w) v = n(rng);
    for (float& v : x) v = n(rng);
    TensorView tw;
    tw.name = "w";
    tw.dtype = DType::F32;
    tw.shape = {V, D};
    tw.data = reinterpret_cast<const std::byte*>(w.data());
    tw.nbytes = w.size() * sizeof(float);
    const std::vector<float> out = lens::project_rows(tw, x, R);
    REQUIRE(out.size() == size_t(R * V));
    double worst = 0;
    for (int64_t r = 0; r < R; ++r)
        for (int64_t v = 0; v < V; ++v) {
            double ref = 0;
            for (int64_t j = 0; j < D; ++j) ref += double(w[size_t(v * D + j)]) * x[size_t(r * D + j)];
            worst = std::max(worst, std::abs(ref - out[size_t(r * V + v)]));
        }
    CHECK(worst < 1e-4);
    CHECK_THROWS(lens::project_rows(tw, std::span<const float>(x).first(size_t(D + 1)), 1));
}

TEST_CASE("lens rows summarize to their top tokens and entropy, and a token is followed by rank and probability", "[logits]") {
    // Row 0: p = 0.5, 0.2, 0.3; row 1: uniform (ties go to the lower id).
    const std::vector<float> rows = {float(std::log(0.5)), float(std::log(0.2)), float(std::log(0.3)), 0.0f, 0.0f, 0.0f};
    const std::vector<lens::RowSummary> s = lens::summarize_rows(rows, 2, 3, 2);
    REQUIRE(s.size() == 2);
    CHECK(s[0].top == std::vector<int32_t>{0, 2});
    CHECK(s[0].prob[0] == Approx(0.5).epsilon(1e-6));
    CHECK(s[0].prob[1] == Approx(0.3).epsilon(1e-6));
    CHECK(s[0].entropy == Approx(-(0.5 * std::log(0.5) + 0.2 * std::log(0.2) + 0.3 * std::log(0.3))).epsilon(1e-6));
    CHECK(s[1].top == std::vector<int32_t>{0, 1});
    CHECK(s[1].entropy == Approx(std::log(3.0)).epsilon(1e-6));
    const lens::TokenTrack t = lens::track_token(rows, 2, 3, 2);
    CHECK(t.rank == std::vector<int64_t>{1, 2});
    CHECK(t.prob[0] == Approx(0.3).epsilon(1e-6));
    CHECK(t.prob[1] == Approx(1.0 / 3.0).epsilon(1e-6));
    CHECK(lens::track_token(rows, 2, 3, 3).rank.empty());
}
