// The explorer's own computations (logit lens, nearest tokens, reductions, statistics) against direct formulas.
#include <cmath>
#include <numeric>

#include "catch.hpp"
#include "strata/transformer.hpp"
#include "strata/backend.hpp"
#include "strata/model.hpp"
#include "support.hpp"
#include "worker/analysis.hpp"
#include "worker/engine_worker.hpp"
#include "worker/token_text.hpp"

using namespace strata;
using namespace strata::ui;

TEST_CASE("rmsnorm_rows and logit_stats follow their formulas", "[ui][analysis]") {
    const std::vector<float> x = {1, 2, 3, 4, -1, 0, 0, 1};  // [2, 4]
    const std::vector<float> g = {1, 0.5f, 2, 1};
    const std::vector<float> y = analysis::rmsnorm_rows(x, 2, g, 1e-5f);
    const double rms0 = std::sqrt((1 + 4 + 9 + 16) / 4.0 + 1e-5);
    CHECK(y[1] == Approx(2 / rms0 * 0.5));
    CHECK(y[2] == Approx(3 / rms0 * 2));
    const double rms1 = std::sqrt(2 / 4.0 + 1e-5);
    CHECK(y[4] == Approx(-1 / rms1));

    const std::vector<float> logits = {2.0f, 1.0f, -3.0f, 0.5f};
    double z = 0;
    for (float l : logits) z += std::exp(double(l));
    double h = 0;
    for (float l : logits) h -= std::exp(l) / z * std::log(std::exp(l) / z);
    const auto st = analysis::logit_stats(logits);
    CHECK(st.log_sum_exp == Approx(std::log(z)));
    CHECK(st.entropy == Approx(h));
}

TEST_CASE("reduce_max_abs keeps the signed extreme of every bucket", "[ui][analysis]") {
    std::vector<float> x(3 * 1000, 0.01f);  // [3, 1000]
    x[1 * 1000 + 777] = -9.0f;
    x[2 * 1000 + 3] = 5.0f;
    const auto r = analysis::reduce_max_abs(x, 3, 1000, 3, 100);
    REQUIRE(r.cols == 100);
    REQUIRE(r.col_step == 10);
    CHECK(r.data[size_t(1 * 100 + 77)] == -9.0f);
    CHECK(r.data[size_t(2 * 100 + 0)] == 5.0f);
    CHECK(r.data[size_t(0 * 100 + 50)] == Approx(0.01f));
}

TEST_CASE("abs_quantile is robust to a few outliers", "[ui][analysis]") {
    std::vector<float> x(1000);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 10) - 4.5f;  // |x| <= 4.5
    x[5] = 1000.0f;
    CHECK(analysis::abs_quantile(x, 0.99) == Approx(4.5f));
    CHECK(analysis::abs_quantile(x, 1.0) == 1000.0f);
}

TEST_CASE("prefix matching scores an induction head near 1 and other heads by where they look", "[ui][analysis]") {
    // tokens: a b c d a b c d; head 0 attends from each token of the second copy to the token after its earlier
    // copy (an induction head), head 1 to itself, head 2 uniformly over its causal row.
    const std::vector<int32_t> tok = {5, 6, 7, 8, 5, 6, 7, 8};
    const int64_t H = 3, T = 8, S = 8;
    std::vector<float> p(size_t(H * T * S), 0.0f);
    auto at = [&](int64_t h, int64_t t, int64_t k) -> float& { return p[size_t((h * T + t) * S + k)]; };
    for (int64_t t = 0; t < T; ++t) {
        at(0, t, t >= 4 ? t - 3 : 0) = 1.0f;
        at(1, t, t) = 1.0f;
        for (int64_t k = 0; k <= t; ++k) at(2, t, k) = 1.0f / float(t + 1);
    }
    const auto pm = analysis::prefix_matching(p, H, T, S, tok);
    CHECK(pm.queries == 4);  // the second copy's four tokens
    CHECK(pm.score[0] == Approx(1.0f));
    CHECK(pm.score[1] == 0.0f);
    CHECK(pm.score[2] == Approx((1.0 / 5 + 1.0 / 6 + 1.0 / 7 + 1.0 / 8) / 4));
    // Keys for earlier positions first (S > T: a run continued from a cache) shift the columns, not the answer.
    std::vector<float> q(size_t(H * T * (S + 2)), 0.0f);
    for (int64_t h = 0; h < H; ++h)
        for (int64_t t = 0; t < T; ++t)
            for (int64_t k = 0; k < S; ++k) q[size_t((h * T + t) * (S + 2) + k + 2)] = at(h, t, k);
    CHECK(analysis::prefix_matching(q, H, T, S + 2, tok).score[0] == Approx(1.0f));
    // No repeat, or only a token repeated right after itself (its "next token" is the query itself): no queries.
    CHECK(analysis::prefix_matching(p, H, T, S, std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8}).queries == 0);
    const std::vector<float> p3(size_t(1 * 3 * 3), 1.0f / 3);
    CHECK(analysis::prefix_matching(p3, 1, 3, 3, std::vector<int32_t>{3, 1, 1}).queries == 0);
    // Shapes that do not fit give no scores rather than reading out of bounds.
    CHECK(analysis::prefix_matching(p, H, T, S, std::vector<int32_t>{1, 2}).queries == 0);
    CHECK(analysis::prefix_matching(std::vector<float>(5), H, T, S, tok).queries == 0);
}

TEST_CASE("logit lens and nearest tokens agree with a direct pass over the golden model", "[ui][analysis]") {
    const auto model = load_model(test::golden_hf_dir());
    const TensorView& w = model->output_weight();
    const int64_t dim = model->config.dim, vocab = w.rows();
    // Two rows: the embeddings of tokens 5 and 1000.
    const TensorView& emb = model->tensor("tok_embeddings");
    std::vector<float> x(size_t(2 * dim));
    emb.row_to_f32(5, x.data());
    emb.row_to_f32(1000, x.data() + dim);
    const auto top = analysis::top_token_per_row(w, x, 2);

    std::vector<float> row(static_cast<size_t>(dim));
    for (int r = 0; r < 2; ++r) {
        int32_t best = 0;
        double bestLogit = -INFINITY, z = 0;
        std::vector<double> logits(static_cast<size_t>(vocab));
        for (int64_t v = 0; v < vocab; ++v) {
            w.row_to_f32(v, row.data());
            double s = 0;
            for (int64_t j = 0; j < dim; ++j) s += double(row[size_t(j)]) * x[size_t(r * dim + j)];
            logits[size_t(v)] = s;
            if (s > bestLogit) bestLogit = s, best = int32_t(v);
        }
        for (double l : logits) z += std::exp(l - bestLogit);
        CHECK(top.id[size_t(r)] == best);
        CHECK(top.logit[size_t(r)] == Approx(bestLogit).epsilon(1e-4));
        CHECK(top.prob[size_t(r)] == Approx(1.0 / z).epsilon(1e-3));
    }

    const auto norms = analysis::row_norms(emb);
    std::vector<float> q(static_cast<size_t>(dim));
    emb.row_to_f32(1000, q.data());
    const auto near = analysis::nearest_rows(emb, norms, q, 5);
    REQUIRE(near.size() == 5);
    CHECK(near[0].first == 1000);
    CHECK(near[0].second == Approx(1.0f).epsilon(1e-5));
    for (size_t i = 1; i < near.size(); ++i) CHECK(near[i].second <= near[i - 1].second);
}

TEST_CASE("tokens are displayed with visible whitespace and raw bytes", "[ui][analysis]") {
    CHECK(displayBytes(" the") == QString::fromUtf8("\u2423the"));
    CHECK(displayBytes("a\nb") == QString::fromUtf8("a\u21b5b"));
    CHECK(displayBytes("\xe2\x82") == QStringLiteral("<0xE2><0x82>"));
    CHECK(displayBytes("\xc3\xa9t\xc3\xa9") == QString::fromUtf8("\u00e9t\u00e9"));
}

TEST_CASE("the logit lens on the backend matches the host computation", "[ui][analysis]") {
    const auto model = load_model(test::golden_hf_dir());
    auto backend = make_backend(BackendOptions{});
    backend->load(*model);
    const ModelConfig& c = model->config;
    const TensorView& emb = model->tensor("tok_embeddings");
    const int64_t rows = 5;
    std::vector<float> x(size_t(rows * c.dim));  // [rows, dim]
    for (int64_t r = 0; r < rows; ++r) emb.row_to_f32(17 * r + 3, x.data() + r * c.dim);
    for (size_t i = 0; i < x.size(); ++i) x[i] *= 1.0f + 0.01f * float(i % 7);

    const std::vector<float> normed = analysis::rmsnorm_rows(x, rows, model->tensor("norm").to_f32(), c.norm_eps);
    const auto host = analysis::top_token_per_row(model->output_weight(), normed, rows);
    Transformer transformer(*model, *backend);
    const auto dev = analysis::top_token_on_backend(transformer, x, rows);
    REQUIRE(dev.id.size() == size_t(rows));
    for (int64_t r = 0; r < rows; ++r) {
        CHECK(dev.id[size_t(r)] == host.id[size_t(r)]);
        CHECK(dev.prob[size_t(r)] == Approx(host.prob[size_t(r)]).epsilon(1e-3));
    }
}

TEST_CASE("a run keeps everything while it fits, then what the views need most", "[ui][analysis]") {
    ModelConfig c;  // Llama 3 8B
    c.dim = 4096;
    c.n_layers = 32;
    c.n_heads = 32;
    c.n_kv_heads = 8;
    c.head_dim = 128;
    c.hidden_dim = 14336;
    c.vocab_size = 128256;
    // 100 x 128256 logits are 51 MB: kept whole, with everything else.
    const TraceRequest tiny = EngineWorker::explorerRequest(c, 100);
    CHECK(tiny.all);
    CHECK(tiny.wants("logits"));
    // 256 x 128256 are 131 MB: every tensor but the logits, whose top-k and statistics come piece by piece.
    const TraceRequest shortRun = EngineWorker::explorerRequest(c, 256);
    CHECK_FALSE(shortRun.all);
    CHECK(shortRun.attention_probs);
    CHECK(shortRun.logits_all_positions);
    CHECK_FALSE(shortRun.wants("logits"));
    for (const TracedShape& s : trace_shapes(c, 256))
        if (s.name != "logits") CHECK(shortRun.wants(s.name));
    CHECK(shortRun.wants("layers.31.ffn_hidden"));
    const TraceRequest medium = EngineWorker::explorerRequest(c, 512);
    CHECK_FALSE(medium.all);
    CHECK_FALSE(medium.attention_probs);
    CHECK(medium.wants("h.31"));
    CHECK(medium.wants("layers.31.attention_out"));
    CHECK(medium.wants("layers.0.ffn_out"));
    CHECK_FALSE(medium.wants("layers.0.ffn_hidden"));
    const TraceRequest longRun = EngineWorker::explorerRequest(c, 4096);
    CHECK(longRun.wants("h.31"));
    CHECK(longRun.wants("x0"));
    CHECK_FALSE(longRun.wants("layers.0.attention_out"));
}
