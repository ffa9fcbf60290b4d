// The causal tools in the explorer, offscreen, on the demonstration model: ablation driven from the attention
// view, the atlas, the FFN heatmap and the toolbar (the run repeats, the ablated columns are zero, the logits
// change, the diff mode subtracts the clean run, the chips remove it again), the compare view's residual
// differences and patching sweep (a layers x positions heatmap arrives, its corners are what patching must give,
// cancel works), attribution (the bars sum to the logit; a bar opens its tensor), and the chat's ablations.
#include <cmath>

#include <QAction>
#include <QCheckBox>
#include <QMenu>
#include <QProgressBar>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTableWidget>
#include <QStandardPaths>
#include <QToolButton>

#include "catch.hpp"
#include "chat/chat_engine.hpp"
#include "chat/chat_panel.hpp"
#include "cards/card_panel.hpp"
#include "chat/conversation.hpp"
#include "explorer/intervention_bar.hpp"
#include "explorer/main_window.hpp"
#include "strata/backend.hpp"
#include "strata/model.hpp"
#include "ui_support.hpp"
#include "views/attention_view.hpp"
#include "views/attribution_view.hpp"
#include "views/compare_view.hpp"
#include "views/heatmap_widget.hpp"
#include "views/tensor_view.hpp"

using namespace strata;
using namespace strata::ui;
using strata::test::distinct_colours;
using strata::test::wait_until;

namespace {

struct Explorer {
    MainWindow w;
    QSignalSpy runs{&w, &MainWindow::runReady};
    QSignalSpy failures{&w, &MainWindow::failed};

    Explorer() {
        w.resize(1600, 1000);
        w.show();
    }
    bool open() {
        w.setLogitLens(false);
        w.openPath(QString::fromStdString(test::demo_model().string()));
        return wait_until([&] { return runs.count() >= 1; });
    }
    // Waits for the run after `before` runs, and for the window to be idle.
    bool nextRun(int before) {
        return wait_until([&] { return runs.count() > before && !w.busy(); });
    }
    ExplorerState& st() { return *w.state(); }
};

// The action of a menu whose text starts with `prefix`.
QAction* action(QMenu& menu, const QString& prefix) {
    for (QAction* a : menu.actions())
        if (a->text().startsWith(prefix)) return a;
    return nullptr;
}

bool columnsZero(const TracedTensor& t, int64_t c0, int64_t n) {
    for (int64_t r = 0; r < t.rows; ++r)
        for (int64_t j = c0; j < c0 + n; ++j)
            if (t.data[size_t(r * t.cols + j)] != 0.0f) return false;
    return true;
}

double maxAbs(const std::vector<float>& v) {
    double m = 0;
    for (float x : v) m = std::max(m, double(std::fabs(x)));
    return m;
}

}  // namespace

TEST_CASE("ablating a head from the attention view repeats the run with its columns zero", "[ui][widgets][interventions]") {
    test::ui_app();
    QStandardPaths::setTestModeEnabled(true);
    Explorer e;
    REQUIRE(e.open());
    ExplorerState& st = e.st();
    const ModelConfig& c = st.model()->config;
    const int64_t hd = c.head_dim;
    const RunResultPtr clean = st.run();
    REQUIRE(clean->ablations.empty());
    REQUIRE_FALSE(clean->clean);
    const TracedTensor* cleanHeads = clean->trace.find("layers.1.attention.heads");
    REQUIRE(cleanHeads);
    CHECK_FALSE(columnsZero(*cleanHeads, 3 * hd, hd));

    // Right-click head 3 of layers.1: the menu offers zero and mean ablation; choose zero.
    e.w.selectPart("block/attention/softmax", 1);
    AttentionView* av = e.w.attentionView();
    REQUIRE(e.w.tabs()->currentWidget() == av);
    QMenu menu;
    av->fillHeadMenu(&menu, 3);
    REQUIRE(action(menu, "Ablate head 3 of layers.1 (mean)"));
    QAction* zero = action(menu, "Ablate head 3 of layers.1 (zero)");
    REQUIRE(zero);
    const int before = int(e.runs.count());
    zero->trigger();
    REQUIRE(e.nextRun(before));
    REQUIRE(e.failures.count() == 0);

    const RunResultPtr run = st.run();
    REQUIRE(run->ablations.size() == 1);
    CHECK(run->ablations[0].spec == "layers.1.attention.heads.3");
    REQUIRE(run->clean);
    CHECK(run->tokens == clean->tokens);
    const TracedTensor* heads = run->trace.find("layers.1.attention.heads");
    REQUIRE(heads);
    CHECK(columnsZero(*heads, 3 * hd, hd));       // the ablated head, at every position
    CHECK_FALSE(columnsZero(*heads, 2 * hd, hd));  // its neighbours are untouched
    CHECK_FALSE(columnsZero(*heads, 4 * hd, hd));
    CHECK(run->trace.last_logits != run->clean->trace.last_logits);  // the logits change
    CHECK(run->trace.find("h.0")->data == run->clean->trace.find("h.0")->data);  // nothing before layer 1 does
    // The chip, the head's cross in the grid and the toolbar's target.
    CHECK(e.w.interventionBar()->count() == 1);
    CHECK(e.w.interventionBar()->chip(0)->text().startsWith("layers.1.attention.heads.3"));
    CHECK(e.w.ablationTarget() == QStringLiteral("layers.1.attention.heads.%1").arg(av->head()));
    av->setHead(5);  // the toolbar follows the selected head
    CHECK(e.w.findChild<QAction*>("actionAblateZero")->text() == "Ablate layers.1.attention.heads.5 (zero)");
    // The menu now offers to remove it.
    QMenu again;
    av->fillHeadMenu(&again, 3);
    CHECK(action(again, "Remove the ablation"));

    // Diff mode: every tensor minus the clean run's; the ablated columns are minus the clean ones.
    e.w.interventionBar()->diffToggle()->setChecked(true);
    CHECK(st.showingDiff());
    const TracedTensor* diff = st.traced("layers.1.attention.heads");
    REQUIRE(diff);
    for (int64_t r = 0; r < diff->rows; ++r)
        for (int64_t j = 3 * hd; j < 4 * hd; ++j) REQUIRE(diff->data[size_t(r * diff->cols + j)] == -cleanHeads->data[size_t(r * cleanHeads->cols + j)]);
    CHECK(maxAbs(st.traced("h.0")->data) == 0.0);  // before the ablation: no difference
    CHECK(maxAbs(st.traced("h.1")->data) > 0.0);
    e.w.selectPart("block", 2);
    e.w.showView(e.w.tensorView());
    CHECK(e.w.tensorView()->heatmap()->data() == st.traced("h.2")->data);
    CHECK(distinct_colours(e.w.tensorView()->heatmap()->grab().toImage()) > 20);
    e.w.interventionBar()->diffToggle()->setChecked(false);
    CHECK(e.w.tensorView()->heatmap()->data() == run->trace.find("h.2")->data);

    // Clicking the chip removes the ablation: the plain pass again.
    const int before2 = int(e.runs.count());
    e.w.interventionBar()->chip(0)->click();
    REQUIRE(e.nextRun(before2));
    CHECK(st.ablations().empty());
    CHECK_FALSE(st.run()->clean);
    CHECK(st.run()->trace.last_logits == clean->trace.last_logits);
    CHECK(e.w.interventionBar()->count() == 0);
}

TEST_CASE("the atlas, the FFN heatmap and the toolbar ablate blocks, neurons and mean ablation", "[ui][widgets][interventions]") {
    test::ui_app();
    QStandardPaths::setTestModeEnabled(true);
    Explorer e;
    REQUIRE(e.open());
    ExplorerState& st = e.st();
    const ModelConfig& c = st.model()->config;

    // A neuron of the ffn_hidden heatmap: the column's spec, ablated; its column is zero.
    e.w.selectPart("block/feed_forward/swiglu", 2);
    e.w.showView(e.w.tensorView());
    CHECK(e.w.tensorView()->columnSpec(17) == "layers.2.feed_forward.neurons.17");
    int before = int(e.runs.count());
    st.addAblation({e.w.tensorView()->columnSpec(17), false});
    REQUIRE(e.nextRun(before));
    CHECK(columnsZero(*st.run()->trace.find("layers.2.ffn_hidden"), 17, 1));
    CHECK_FALSE(columnsZero(*st.run()->trace.find("layers.2.ffn_hidden"), 16, 1));

    // The toolbar on the atlas's feed_forward of layers.2, mean mode: ffn_out becomes its mean over the positions
    // of the plain run, the same row at every position.
    e.w.selectPart("block/feed_forward", 2);
    QAction* mean = e.w.findChild<QAction*>("actionAblateMean");
    REQUIRE(mean);
    CHECK(e.w.ablationTarget() == "layers.2.feed_forward");
    REQUIRE(mean->isEnabled());
    before = int(e.runs.count());
    mean->trigger();
    REQUIRE(e.nextRun(before));
    REQUIRE(e.failures.count() == 0);
    REQUIRE(st.ablations().size() == 2);
    CHECK(st.ablations()[1].mean);
    const TracedTensor& out = *st.run()->trace.find("layers.2.ffn_out");
    const TracedTensor& cleanOut = *st.run()->clean->trace.find("layers.2.ffn_out");
    for (int64_t j = 0; j < c.dim; ++j) {
        double m = 0;
        for (int64_t r = 0; r < cleanOut.rows; ++r) m += cleanOut.data[size_t(r * c.dim + j)];
        m /= double(cleanOut.rows);
        for (int64_t r = 0; r < out.rows; ++r) REQUIRE(std::fabs(out.data[size_t(r * c.dim + j)] - m) < 1e-5 * (1 + std::fabs(m)));
    }
    CHECK(e.w.interventionBar()->count() == 2);
    CHECK(e.w.interventionBar()->chip(1)->text().startsWith("layers.2.feed_forward (mean)"));

    // A whole block skipped: its output equals its input.
    before = int(e.runs.count());
    st.setAblations({{QStringLiteral("layers.1"), false}});
    REQUIRE(e.nextRun(before));
    CHECK(st.run()->trace.find("h.1")->data == st.run()->trace.find("h.0")->data);

    // Opening a model clears the ablations (they name the old model's parts), chips included; its run is plain.
    before = int(e.runs.count());
    e.w.openPath(QString::fromStdString(test::demo_model().string()));
    REQUIRE(e.nextRun(before));
    CHECK(st.ablations().empty());
    CHECK(e.w.interventionBar()->count() == 0);
    CHECK_FALSE(st.run()->clean);
}

TEST_CASE("the compare view shows residual differences and runs the patching sweep with progress and cancel", "[ui][widgets][interventions]") {
    test::ui_app();
    QStandardPaths::setTestModeEnabled(true);
    Explorer e;
    REQUIRE(e.open());
    const ModelConfig& c = e.st().model()->config;
    CompareView* cv = e.w.compareView();
    e.w.showView(cv);
    CHECK(e.w.cardPanel()->cardId() == "compare");
    QSignalSpy compared(cv, &CompareView::compareReady);
    QSignalSpy swept(cv, &CompareView::sweepReady);
    QSignalSpy cancelled(cv, &CompareView::sweepCancelled);

    // Prompts of different lengths: a clear message, no residual maps, no sweep.
    cv->setPrompts("The cat sat on the mat", "The cat sat");
    cv->compare();
    REQUIRE(wait_until([&] { return compared.count() == 1; }));
    CHECK_FALSE(cv->compareResult()->problem.isEmpty());
    CHECK(cv->normMap()->rows() == 0);
    CHECK_FALSE(cv->sweepButton()->isEnabled());

    cv->setPrompts(CompareView::kDefaultClean, CompareView::kDefaultCorrupt);
    cv->compare();
    REQUIRE(wait_until([&] { return compared.count() == 2; }));
    const CompareResultPtr r = cv->compareResult();
    REQUIRE(r->problem.isEmpty());
    const int64_t T = r->positions;
    REQUIRE(T == int64_t(r->cleanTokens.size()));
    CHECK(cv->normMap()->rows() == c.n_layers + 1);
    CHECK(cv->normMap()->cols() == T);
    CHECK(cv->cosineMap()->rows() == c.n_layers + 1);
    // x0 differs exactly where the tokens differ; cos is 1 where the whole prefix agrees.
    int first = -1;
    for (int64_t p = 0; p < T; ++p) {
        const bool differs = r->cleanTokens[size_t(p)] != r->corruptTokens[size_t(p)];
        if (differs && first < 0) first = int(p);
        CHECK((r->diffNorm[size_t(p)] > 0) == differs);
    }
    REQUIRE(first > 0);
    CHECK(std::fabs(r->cosine[size_t(c.n_layers * T + first - 1)] - 1.0f) < 1e-5f);
    CHECK(r->rose.size() > 3);
    CHECK(r->rose.front().corrupt - r->rose.front().clean >= r->rose.back().corrupt - r->rose.back().clean);
    CHECK(cv->changes()->rowCount() > 3);
    REQUIRE(cv->sweepButton()->isEnabled());

    // The sweep: an n_layers x T heatmap, progress to the end.
    cv->setScaleMode(1);  // effect - corrupt
    cv->runSweep();
    CHECK(cv->sweeping());
    CHECK(cv->cancelButton()->isEnabled());
    REQUIRE(wait_until([&] { return swept.count() == 1; }));
    REQUIRE(e.failures.count() == 0);
    const SweepResultPtr s = cv->sweepResult();
    REQUIRE(s->sweep.effect.size() == size_t(c.n_layers));
    REQUIRE(s->sweep.effect[0].size() == size_t(T));
    CHECK(cv->sweepMap()->rows() == c.n_layers);
    CHECK(cv->sweepMap()->cols() == T);
    CHECK(cv->progressBar()->value() == cv->progressBar()->maximum());
    CHECK(cv->progressBar()->maximum() == c.n_layers * T);
    // Where the prompts agree, patching changes nothing; the last block's residual at the last position is
    // everything the logits read, so patching it restores the clean metric.
    for (int64_t L = 0; L < c.n_layers; ++L) CHECK(std::fabs(s->sweep.effect[size_t(L)][0] - s->sweep.corrupt) < 1e-4);
    CHECK(std::fabs(s->sweep.effect[size_t(c.n_layers - 1)][size_t(T - 1)] - s->sweep.clean) < 1e-3 * (1 + std::fabs(s->sweep.clean)));
    CHECK(cv->sweepMap()->data()[0] == Approx(0.0).margin(1e-4));  // centred on the corrupt metric
    CHECK(distinct_colours(cv->sweepMap()->grab().toImage()) > 5);
    CHECK(cv->sweepStatus().contains("clean"));

    // Cancel: the sweep stops, nothing arrives, the button comes back.
    cv->setSite(PatchSite::FfnOut);
    cv->runSweep();
    REQUIRE(cv->sweeping());
    cv->cancelSweep();
    REQUIRE(wait_until([&] { return cancelled.count() == 1; }));
    CHECK_FALSE(cv->sweeping());
    CHECK(cv->sweepButton()->isEnabled());
    QTest::qWait(100);
    CHECK(swept.count() == 1);
    CHECK(cv->sweepResult() == s);
}

TEST_CASE("attribution: one bar per component, summing to the logit, each opening its tensor", "[ui][widgets][interventions]") {
    test::ui_app();
    QStandardPaths::setTestModeEnabled(true);
    Explorer e;
    REQUIRE(e.open());
    ExplorerState& st = e.st();
    const ModelConfig& c = st.model()->config;
    AttributionView* v = e.w.attributionView();
    QSignalSpy ready(v, &AttributionView::ready);
    e.w.showView(v);  // attributes the selected (last) position's top-1 token by itself
    CHECK(e.w.cardPanel()->cardId() == "attribution");
    REQUIRE(wait_until([&] { return ready.count() >= 1; }));
    const AttributionResultPtr r = v->result();
    const int T = st.positions();
    CHECK(r->attribution.position == T - 1);
    CHECK(r->attribution.target == st.run()->trace.top_k[size_t(T - 1)].front().id);
    REQUIRE(r->attribution.components.size() == size_t(1 + c.n_layers * (c.n_heads + 1)));
    double sum = 0;
    for (const AttributionComponent& comp : r->attribution.components) sum += comp.value;
    CHECK(sum == Approx(r->attribution.logit).epsilon(1e-3).margin(1e-3));
    CHECK(v->bars()->count() == int(r->attribution.components.size()));
    // Sorted by |value| by default; layer order on request.
    CHECK(std::fabs(v->bars()->bar(0).value) >= std::fabs(v->bars()->bar(1).value));
    v->setSortByMagnitude(false);
    CHECK(v->bars()->bar(0).name == "x0");
    CHECK(v->bars()->bar(1).name == "layers.0.attention.heads.0");
    CHECK(v->summary().contains("sum of the"));

    // Click a head's bar: the tensor view shows that layer's heads; a feed_forward's: its ffn_out.
    QTest::mouseClick(v->bars(), Qt::LeftButton, {}, v->bars()->barRect(1 + c.n_heads + 1 + 2).center());  // layers.1 head 2
    CHECK(e.w.tabs()->currentWidget() == e.w.tensorView());
    CHECK(e.w.tensorView()->shownName() == "layers.1.attention.heads");
    CHECK(e.w.attentionView()->head() == 2);
    e.w.showView(v);
    QTest::mouseClick(v->bars(), Qt::LeftButton, {}, v->bars()->barRect(int(c.n_heads) + 1).center());  // layers.0.feed_forward
    CHECK(e.w.tensorView()->shownName() == "layers.0.ffn_out");

    // With a head ablated, attribution runs the ablated pass: that head's bar is 0.
    int runsBefore = int(e.runs.count());
    st.addAblation({QStringLiteral("layers.1.attention.heads.2"), false});
    REQUIRE(e.nextRun(runsBefore));
    e.w.showView(v);
    v->attribute(T - 1, r->attribution.target);
    REQUIRE(wait_until([&] { return v->result() != r && !v->busy(); }));
    REQUIRE(v->result()->ablations.size() == 1);
    for (const AttributionComponent& comp : v->result()->attribution.components)
        if (comp.name == "layers.1.attention.heads.2") CHECK(comp.value == 0.0);
    const AttributionResultPtr ablated = v->result();
    st.clearAblations();
    REQUIRE(e.nextRun(runsBefore + 1));

    // Another position and target.
    e.w.showView(v);
    v->attribute(2, 100);
    REQUIRE(wait_until([&] { return v->result() != ablated && !v->busy(); }));
    CHECK(v->result()->attribution.position == 2);
    CHECK(v->result()->attribution.target == 100);
}

TEST_CASE("chat replies carry their ablations, and the KV cache is not reused across a change of them", "[ui][chat][interventions]") {
    test::ui_app();
    std::unique_ptr<Model> model = load_model(test::demo_model());
    BackendOptions o;
    o.name = "cpu";
    std::unique_ptr<Backend> backend = make_backend(o);
    backend->load(*model);
    ChatEngine engine(*model, *backend);
    ChatRequest request;
    request.mode = ChatMode::Completion;
    request.document = "Once upon a time there was a";
    request.sampler = SamplerSettings{0.0f, 0, 1.0f, 0.0f, 0};
    request.maxTokens = 4;
    auto firstLogit = [&](const ChatRequest& r) {
        std::vector<float> logits;
        ChatEngine::Callbacks cb;
        cb.token = [&](const ChatToken& t) { logits.push_back(t.logit); };
        const ChatOutcome out = engine.generate(r, cb);
        REQUIRE(out.error.isEmpty());
        REQUIRE_FALSE(logits.empty());
        return logits.front();
    };
    const float plain = firstLogit(request);
    ChatRequest ablated = request;
    ablated.ablations = {"layers.0", "layers.2.attention.heads.1"};
    const float withAblation = firstLogit(ablated);
    CHECK(withAblation != plain);
    // Back without them: the same as the first time (a reused cache would still hold the ablated prompt).
    CHECK(firstLogit(request) == plain);
    ChatRequest bad = request;
    bad.ablations = {"layers.99"};
    const ChatOutcome out = engine.generate(bad, {});
    CHECK(out.error.contains("layers.99"));
}

TEST_CASE("from the chat: what made this token, and ablate a head then regenerate", "[ui][chat][widgets][interventions]") {
    test::ui_app();
    QStandardPaths::setTestModeEnabled(true);
    Explorer e;
    REQUIRE(e.open());
    auto* panel = e.w.findChild<ChatPanel*>(QStringLiteral("chatPanel"));
    auto* modes = e.w.findChild<QTabWidget*>(QStringLiteral("strataModes"));
    REQUIRE(panel);
    REQUIRE(modes);
    modes->setCurrentWidget(panel);
    ChatSettings s;
    s.sampler = SamplerSettings{0.8f, 0, 1.0f, 0.0f, 7};
    s.maxTokens = 6;
    s.contextLength = 1024;
    panel->setSettings(s);
    QSignalSpy finished(panel, &ChatPanel::replyFinished);
    panel->input()->setPlainText(QStringLiteral("Hello there"));
    panel->send();
    REQUIRE(wait_until([&] { return finished.count() == 1; }));
    const int entry = panel->conversation()->lastReply();
    REQUIRE(entry >= 0);
    const std::vector<ChatTokenPtr> before = panel->conversation()->entry(entry).tokens;
    REQUIRE(before.size() >= 2);

    // What made the second token: the explorer runs the conversation up to it and attributes it at the step
    // that chose it.
    AttributionView* v = e.w.attributionView();
    QSignalSpy ready(v, &AttributionView::ready);
    const int runsBefore = int(e.runs.count());
    panel->explainToken(entry, 1);
    REQUIRE(wait_until([&] { return e.runs.count() > runsBefore && ready.count() >= 1 && !v->busy(); }));
    CHECK(modes->currentIndex() == 0);  // the explorer
    CHECK(e.w.tabs()->currentWidget() == v);
    const AttributionResultPtr r = v->result();
    CHECK(r->attribution.target == before[1]->id);
    CHECK(r->attribution.position == before[1]->position - 1);
    CHECK(r->tokens == e.st().run()->tokens);
    // Its logit is the one the chat saw when it chose the token (the same pass, no ablation).
    CHECK(r->attribution.logit == Approx(before[1]->logit).margin(1e-3));

    // Ablate a head and regenerate: the same seed, the head zeroed in every step, so the logits change.
    modes->setCurrentWidget(panel);
    panel->ablateHeadAndRegenerate(1, 2);
    CHECK(panel->ablations() == std::vector<QString>{QStringLiteral("layers.1.attention.heads.2")});
    REQUIRE(wait_until([&] { return finished.count() == 2; }));
    const int again = panel->conversation()->lastReply();
    REQUIRE(again == entry);
    const std::vector<ChatTokenPtr> after = panel->conversation()->entry(again).tokens;
    REQUIRE_FALSE(after.empty());
    CHECK(after[0]->logit != before[0]->logit);
    CHECK(panel->conversation()->entry(again).attempt == panel->conversation()->entry(entry).attempt);
}
