// EngineWorker's causal tools (declared in worker/engine_worker.hpp): the clean / corrupt comparison, the
// patching sweep and direct logit attribution. The engine does the work (strata/causal.hpp); this file turns
// the GUI's requests into engine calls and the answers into value types for the views.
#include <algorithm>
#include <cmath>

#include <QElapsedTimer>

#include "strata/causal.hpp"
#include "strata/error.hpp"
#include "strata/intervention.hpp"
#include "strata/model.hpp"
#include "strata/transformer.hpp"
#include "worker/engine_worker.hpp"

namespace strata::ui {

namespace {

constexpr size_t kChanges = 12;     // tokens listed as rising and as falling
constexpr size_t kCandidates = 10;  // top tokens of each prompt offered as answer / foil

// The residual stream of a trace as rows x0, h.0 .. h.{L-1}.
std::vector<const TracedTensor*> residuals(const Trace& trace, int64_t layers) {
    std::vector<const TracedTensor*> out;
    for (int64_t l = -1; l < layers; ++l) {
        const std::string name = l < 0 ? std::string("x0") : "h." + std::to_string(l);
        const TracedTensor* t = trace.find(name);
        if (!t) throw ModelError("the trace has no " + name);
        out.push_back(t);
    }
    return out;
}

}  // namespace

void EngineWorker::compare(qint64 id, const QString& cleanText, const QString& corruptText, const AblationList& ablations) {
    beginTask(id);
    const QString what = tr("comparing the clean and corrupt prompts");
    if (!transformer_) {
        emit failed(id, what, tr("no model is open"));
        return;
    }
    try {
        const ModelConfig& c = model_->config;
        auto r = std::make_shared<CompareResult>();
        r->id = id;
        r->ablations = ablations;
        r->cleanTokens = promptTokens(cleanText);
        r->corruptTokens = promptTokens(corruptText);
        for (int32_t t : r->cleanTokens) r->cleanTexts << tokenText(t);
        for (int32_t t : r->corruptTokens) r->corruptTexts << tokenText(t);

        // Both prompts through the same pass: residuals and the last position's logits.
        auto pass = [&](const std::vector<int32_t>& tokens) {
            TraceRequest request;
            request.residuals = true;
            request.top_k = int64_t(kCandidates);
            request.interventions = resolveFor(id, ablations, tokens);
            KVCache cache(*backend_, c, int64_t(tokens.size()));
            return transformer_->prefill(cache, tokens, request, &abort_);
        };
        const Trace clean = pass(r->cleanTokens);
        const Trace corrupt = pass(r->corruptTokens);

        r->rows = c.n_layers + 1;
        if (r->cleanTokens.size() != r->corruptTokens.size()) {
            r->problem = tr("The prompts have %1 and %2 tokens: the residuals (and the patching sweep) compare position "
                            "by position, so they need the same length. Change a word for a word that is one token.")
                             .arg(r->cleanTokens.size())
                             .arg(r->corruptTokens.size());
        } else {
            const int64_t T = int64_t(r->cleanTokens.size());
            r->positions = T;
            r->diffNorm.assign(size_t(r->rows * T), 0.0f);
            r->cosine.assign(size_t(r->rows * T), 0.0f);
            const auto a = residuals(clean, c.n_layers), b = residuals(corrupt, c.n_layers);
            for (int64_t l = 0; l < r->rows; ++l)
                for (int64_t p = 0; p < T; ++p) {
                    const float* x = a[size_t(l)]->data.data() + p * c.dim;  // [dim]
                    const float* y = b[size_t(l)]->data.data() + p * c.dim;  // [dim]
                    double d2 = 0, xy = 0, xx = 0, yy = 0;
                    for (int64_t i = 0; i < c.dim; ++i) {
                        const double dx = double(y[i]) - double(x[i]);
                        d2 += dx * dx;
                        xy += double(x[i]) * y[i];
                        xx += double(x[i]) * x[i];
                        yy += double(y[i]) * y[i];
                    }
                    r->diffNorm[size_t(l * T + p)] = float(std::sqrt(d2));
                    r->cosine[size_t(l * T + p)] = xx > 0 && yy > 0 ? float(xy / std::sqrt(xx * yy)) : 0.0f;
                }
        }

        // The logits' change at the last position: corrupt - clean, per token.
        const std::vector<float>& lc = clean.last_logits;    // [vocab]
        const std::vector<float>& lk = corrupt.last_logits;  // [vocab]
        std::vector<int32_t> order(lc.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = int32_t(i);
        auto delta = [&](int32_t i) { return lk[size_t(i)] - lc[size_t(i)]; };
        const size_t n = std::min(kChanges, order.size());
        std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(n), order.end(),
                          [&](int32_t x, int32_t y) { return delta(x) > delta(y); });
        for (size_t i = 0; i < n; ++i) r->rose.push_back({order[i], lc[size_t(order[i])], lk[size_t(order[i])]});
        std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(n), order.end(),
                          [&](int32_t x, int32_t y) { return delta(x) < delta(y); });
        for (size_t i = 0; i < n; ++i) r->fell.push_back({order[i], lc[size_t(order[i])], lk[size_t(order[i])]});

        for (const Trace* t : {&clean, &corrupt})
            if (!t->top_k.empty())
                for (const TokenScore& s : t->top_k.back())
                    if (std::find(r->candidates.begin(), r->candidates.end(), s.id) == r->candidates.end())
                        r->candidates.push_back(s.id);
        for (const auto* list : {&r->rose, &r->fell})
            for (const CompareResult::Change& ch : *list) r->vocabText.emplace(ch.id, tokenText(ch.id));
        for (int32_t tok : r->candidates) r->vocabText.emplace(tok, tokenText(tok));
        emit compareFinished(r);
    } catch (const Cancelled&) {
        emit cancelled(id, what);
    } catch (const std::exception& e) {
        emit failed(id, what, QString::fromUtf8(e.what()));
    }
}

void EngineWorker::patchSweep(qint64 id, const std::vector<int32_t>& clean, const std::vector<int32_t>& corrupt, int answer,
                              int foil, int site, const AblationList& ablations) {
    beginTask(id);
    const QString what = tr("running the patching sweep");
    if (!transformer_) {
        emit failed(id, what, tr("no model is open"));
        return;
    }
    try {
        auto r = std::make_shared<SweepResult>();
        r->id = id;
        r->answer = answer;
        r->foil = foil;
        r->answerText = tokenText(answer);
        r->foilText = tokenText(foil);
        r->ablations = ablations;
        for (int32_t t : clean) r->cleanTexts << tokenText(t);
        for (int32_t t : corrupt) r->corruptTexts << tokenText(t);

        PatchSweepOptions options;
        options.site = PatchSite(site);
        options.cancel = &abort_;
        // Mean ablations take their means from the clean prompt's plain run.
        options.base = resolveFor(id, ablations, clean);
        QElapsedTimer throttle;
        throttle.start();
        options.progress = [&](int64_t done, int64_t total) {
            if (throttle.elapsed() >= 40 || done == total) {
                throttle.restart();
                emit sweepProgress(id, done, total);
            }
            return !abort_.load();
        };
        QElapsedTimer timer;
        timer.start();
        r->sweep = patch_sweep(*transformer_, clean, corrupt, answer, foil, options);
        r->seconds = double(timer.nsecsElapsed()) * 1e-9;
        emit sweepFinished(r);
    } catch (const Cancelled&) {
        emit cancelled(id, what);
    } catch (const std::exception& e) {
        emit failed(id, what, QString::fromUtf8(e.what()));
    }
}

void EngineWorker::attribute(qint64 id, const std::vector<int32_t>& tokens, int target, int position,
                             const AblationList& ablations) {
    beginTask(id);
    const QString what = tr("attributing the logit of token %1").arg(target);
    if (!transformer_) {
        emit failed(id, what, tr("no model is open"));
        return;
    }
    try {
        auto r = std::make_shared<AttributionResult>();
        r->id = id;
        r->tokens = tokens;
        r->ablations = ablations;
        for (int32_t t : tokens) r->tokenTexts << tokenText(t);
        r->attribution = strata::attribute(*transformer_, tokens, target, position, resolveFor(id, ablations, tokens));
        r->targetText = tokenText(r->attribution.target);
        emit attributionFinished(r);
    } catch (const Cancelled&) {
        emit cancelled(id, what);
    } catch (const std::exception& e) {
        emit failed(id, what, QString::fromUtf8(e.what()));
    }
}

}  // namespace strata::ui
