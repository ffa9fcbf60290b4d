// The explorer window offscreen, end to end: open the demonstration model, run a prompt, step through layers,
// select parts, and check that the views change and draw non-uniform images, that the cards follow, and that
// exports write what is shown.
#include <QFileInfo>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTableWidget>
#include <QToolButton>
#include <QTreeView>

#include "cards/card_panel.hpp"
#include "catch.hpp"
#include "explorer/atlas_model.hpp"
#include "explorer/engine_client.hpp"
#include "explorer/layer_stepper.hpp"
#include "explorer/main_window.hpp"
#include "explorer/token_chips.hpp"
#include "strata/model.hpp"
#include "strata/npy.hpp"
#include "ui_support.hpp"
#include "views/attention_view.hpp"
#include "worker/analysis.hpp"
#ifdef STRATA_HAVE_VULKAN
#include "strata/vulkan.hpp"
#endif
#include "views/embedding_view.hpp"
#include "views/gains_view.hpp"
#include "views/heatmap_widget.hpp"
#include "views/logits_view.hpp"
#include "views/norms_view.hpp"
#include "views/strata_view.hpp"
#include "views/tensor_view.hpp"

using namespace strata;
using namespace strata::ui;
using strata::test::distinct_colours;
using strata::test::wait_until;

namespace {

struct Explorer {
    MainWindow w;
    QSignalSpy loaded{&w, &MainWindow::modelReady};
    QSignalSpy runs{&w, &MainWindow::runReady};
    QSignalSpy lenses{&w, &MainWindow::lensReady};
    QSignalSpy failures{&w, &MainWindow::failed};

    Explorer() {
        w.resize(1600, 1000);
        w.show();
    }
    bool openDemoCopy() {
        w.openPath(QString::fromStdString(test::demo_model().string()));
        return wait_until([&] { return runs.count() >= 1 && lenses.count() >= 1; });
    }
    ExplorerState& st() { return *w.state(); }
};

QImage grabbed(QWidget* w) { return w->grab().toImage(); }

}  // namespace

TEST_CASE("the explorer opens a model, runs the prompt, and steps through layers without recomputing", "[ui][widgets]") {
    test::ui_app();
    QStandardPaths::setTestModeEnabled(true);  // recent models go to a test settings file
    Explorer e;
    REQUIRE(e.openDemoCopy());
    REQUIRE(e.failures.count() == 0);
    ExplorerState& st = e.st();
    REQUIRE(st.model());
    CHECK(st.model()->config.is_demo);
    CHECK(e.w.windowTitle().contains("demonstration model: a tiny trained Llama 3"));
    const int T = st.positions();
    REQUIRE(T > 4);
    CHECK(e.w.chips()->count() == T);
    CHECK(st.run()->tokens[0] == st.model()->config.bos_id);

    // The residual after block 0, as a heatmap.
    e.w.selectPart("block", 0);
    e.w.showView(e.w.tensorView());
    ui::TensorView* tv = e.w.tensorView();
    CHECK(tv->shownName() == "h.0");
    REQUIRE(tv->hasContent());
    CHECK(tv->heatmap()->rows() == T);
    CHECK(tv->heatmap()->cols() == st.model()->config.dim);
    const QImage a = grabbed(tv->heatmap());
    CHECK(distinct_colours(a) > 50);
    const std::vector<float> dataA = tv->heatmap()->data();
    CHECK(e.w.cardPanel()->cardId() == "h");

    // Step to the next layer: same part, next block, new data from the kept trace, no new run.
    e.w.stepper()->next();
    CHECK(st.layer() == 1);
    CHECK(tv->shownName() == "h.1");
    CHECK(tv->heatmap()->data() != dataA);
    CHECK(grabbed(tv->heatmap()) != a);
    CHECK(e.w.atlas()->layer(e.w.atlasView()->currentIndex()) == 1);
    CHECK(e.w.atlas()->part(e.w.atlasView()->currentIndex()).key == "block");
    // Keyboard: ] and Page Up.
    e.w.atlasView()->setFocus();
    QTest::keyClick(e.w.atlasView(), Qt::Key_BracketRight);
    CHECK(st.layer() == 2);
    QTest::keyClick(e.w.atlasView(), Qt::Key_PageUp);
    CHECK(st.layer() == 1);
    // Play runs to the last layer and stops.
    e.w.stepper()->setInterval(20);
    e.w.stepper()->togglePlay();
    CHECK(wait_until([&] { return !e.w.stepper()->playing(); }, 5000));
    CHECK(st.layer() == st.layers() - 1);
    CHECK(e.runs.count() == 1);  // stepping never ran the model again

    // A chip selects its position; the heatmap marks it.
    e.w.chips()->chip(2)->click();
    CHECK(st.position() == 2);

    // A sub-step inside a block: the SwiGLU hidden layer.
    e.w.selectPart("block/feed_forward/swiglu", 1);
    CHECK(tv->shownName() == "layers.1.ffn_hidden");
    CHECK(tv->heatmap()->cols() == st.model()->config.hidden_dim);
    CHECK(e.w.cardPanel()->cardId() == "ffn_hidden");
    CHECK(e.w.cardPanel()->sourceText().contains("b.matmul_swiglu(hidden, x, *w.w1, *w.w3, T, a, g);"));
}

TEST_CASE("every view draws the demonstration model's run", "[ui][widgets]") {
    test::ui_app();
    QStandardPaths::setTestModeEnabled(true);
    Explorer e;
    REQUIRE(e.openDemoCopy());
    ExplorerState& st = e.st();
    const int T = st.positions();

    SECTION("attention") {
        e.w.selectPart("block/attention/softmax", 1);
        AttentionView* av = e.w.attentionView();
        CHECK(e.w.tabs()->currentWidget() == av);
        REQUIRE(av->hasContent());
        CHECK(av->headMap()->rows() == T);
        CHECK(av->headMap()->cols() == T);
        // Causal: nothing above the diagonal, each row sums to 1.
        const std::vector<float>& p = av->headMap()->data();
        for (int t = 0; t < T; ++t) {
            double sum = 0;
            for (int s = 0; s < T; ++s) {
                sum += p[size_t(t * T + s)];
                if (s > t) CHECK(p[size_t(t * T + s)] == 0.0f);
            }
            CHECK(sum == Approx(1.0).epsilon(1e-4));
        }
        const std::vector<float> head0 = p;
        av->setHead(3);
        CHECK(av->headMap()->data() != head0);
        CHECK(distinct_colours(grabbed(av->grid())) > 10);
        CHECK(e.w.cardPanel()->cardId() == "attention_probs");
        // The default prompt repeats tokens, so every head has a prefix-matching score, and the button names the
        // strongest head of the model and goes to it.
        const auto& scores = av->inductionScores();
        REQUIRE(int(scores.size()) == st.layers());
        const auto [bl, bh] = av->strongestInductionHead();
        REQUIRE(bl >= 0);
        for (int l = 0; l < st.layers(); ++l) {
            const TracedTensor* probs = st.run()->trace.find("layers." + std::to_string(l) + ".attention.probs");
            REQUIRE(probs);
            const auto pm = analysis::prefix_matching(probs->data, st.model()->config.n_heads, T, probs->cols,
                                                      st.run()->tokens);
            CHECK(pm.queries > 0);
            CHECK(pm.score == scores[size_t(l)]);
            for (float v : scores[size_t(l)]) CHECK(v <= scores[size_t(bl)][size_t(bh)]);
        }
        CHECK(av->strongestButton()->isVisible());
        CHECK(av->strongestButton()->text().contains(QStringLiteral("layers.%1 h%2").arg(bl).arg(bh)));
        st.setLayer(bl == 0 ? 1 : 0);
        av->setHead(bh == 0 ? 1 : 0);
        av->strongestButton()->click();
        CHECK(st.layer() == bl);
        CHECK(av->head() == bh);
    }
    SECTION("RMSNorm gains") {
        e.w.showView(e.w.gainsView());
        e.w.selectPart("block/ffn_norm", 2);
        GainsView* gv = e.w.gainsView();
        CHECK(e.w.tabs()->currentWidget() == gv);
        CHECK(gv->selectedNorm() == "layers.2.ffn_norm");
        CHECK(e.w.cardPanel()->cardId() == "w_ffn_norm");
        CHECK(gv->tensorExport().data.size() == size_t(st.model()->config.dim));
        CHECK(distinct_colours(grabbed(gv)) > 10);
    }
    SECTION("strata and the logit lens") {
        e.w.showView(e.w.strataView());
        StrataGrid* grid = e.w.strataView()->grid();
        REQUIRE(e.w.strataView()->hasContent());
        CHECK(grid->rows() == st.layers() + 1);
        CHECK(grid->positions() == T);
        REQUIRE(st.lens());
        CHECK(st.lens()->top.size() == size_t((st.layers() + 1) * T));
        CHECK(distinct_colours(grabbed(grid)) > 10);
        // Click the cell of h.2 at position 1: the explorer goes there.
        QSignalSpy clicked(grid, &StrataGrid::cellClicked);
        QTest::mouseClick(grid, Qt::LeftButton, {}, grid->cellRect(3, 1).center());
        REQUIRE(clicked.count() == 1);
        CHECK(st.layer() == 2);
        CHECK(st.position() == 1);
        CHECK(st.part().key == "block");
        CHECK(e.w.atlas()->layer(e.w.atlasView()->currentIndex()) == 2);
        // The bottom row is x0: the embedding.
        QTest::mouseClick(grid, Qt::LeftButton, {}, grid->cellRect(0, 0).center());
        CHECK(st.part().key == "tok_embeddings");
        CHECK(st.position() == 0);
    }
    SECTION("residual norms") {
        e.w.showView(e.w.normsView());
        NormsView* nv = e.w.normsView();
        REQUIRE(nv->hasContent());
        const ResidualNorms& n = nv->norms();
        CHECK(n.residual.size() == size_t((st.layers() + 1) * T));
        for (float v : n.residual) CHECK(v > 0.0f);
        for (float v : n.attention) CHECK(v > 0.0f);
        CHECK(distinct_colours(grabbed(nv)) > 10);
    }
    SECTION("token embeddings and nearest tokens") {
        e.w.showView(e.w.embeddingView());
        st.setPosition(3);
        EmbeddingView* ev = e.w.embeddingView();
        REQUIRE(wait_until([&] { return ev->hasContent() && ev->table()->rowCount() == EmbeddingView::kNeighbours; }));
        CHECK(ev->table()->item(0, 2)->text().toInt() == st.run()->tokens[3]);
        CHECK(ev->tensorExport().shape == std::vector<int64_t>{st.model()->config.dim});
        CHECK(distinct_colours(grabbed(ev)) > 10);
        CHECK(e.w.cardPanel()->cardId() == "w_tok_embeddings");
    }
    SECTION("logits") {
        e.w.showView(e.w.logitsView());
        st.setPosition(T - 1);
        const auto& rows = e.w.logitsView()->bars()->rows();
        REQUIRE(rows.size() == size_t(EngineWorker::kTopK));
        double sum = 0;
        for (size_t i = 0; i < rows.size(); ++i) {
            CHECK(rows[i].prob > 0.0);
            if (i) CHECK(rows[i].logit <= rows[i - 1].logit);
            sum += rows[i].prob;
        }
        CHECK(sum <= 1.0 + 1e-6);
        CHECK(e.w.cardPanel()->cardId() == "logits");
    }
}

TEST_CASE("weights are read on the worker and exports write what is shown", "[ui][widgets]") {
    test::ui_app();
    QStandardPaths::setTestModeEnabled(true);
    Explorer e;
    REQUIRE(e.openDemoCopy());
    ui::TensorView* tv = e.w.tensorView();
    const ModelConfig& c = e.st().model()->config;

    e.w.selectPart("block/attention/wq", 0);
    tv->setShowWeight(true);
    REQUIRE(wait_until([&] { return tv->hasContent(); }));
    CHECK(tv->shownName() == "layers.0.attention.wq");
    CHECK(tv->heatmap()->rows() == c.q_dim());
    CHECK(tv->heatmap()->cols() == c.dim);
    CHECK(distinct_colours(grabbed(tv->heatmap())) > 50);
    CHECK(e.w.cardPanel()->cardId() == "w_wq");
    CHECK(e.w.cardPanel()->html().contains("Query projection"));
    CHECK(e.w.cardPanel()->sourceText().contains(
        "b.matmul_qkv(xq, xk, xv, x, *w.wq, *w.wk, *w.wv, T, c.n_heads, c.n_kv_heads, pos0);"));

    const std::filesystem::path dir = test::temp_dir("ui-export");
    const QString wq = QString::fromStdString((dir / "wq.npy").string());
    tv->exportNpy(wq);
    REQUIRE(wait_until([&] { return QFileInfo::exists(wq) && QFileInfo(wq).size() > 0; }));
    REQUIRE(wait_until([&] { return QFileInfo(wq).size() >= qint64(c.q_dim() * c.dim * 4); }, 10000));
    const NpyArray w = read_npy(wq.toStdString());
    CHECK(w.shape == std::vector<int64_t>{c.q_dim(), c.dim});

    tv->setShowWeight(false);
    CHECK(tv->shownName() == "layers.0.q");
    const QString q = QString::fromStdString((dir / "q.npy").string());
    tv->exportNpy(q);
    const NpyArray a = read_npy(q.toStdString());
    CHECK(a.shape == std::vector<int64_t>{e.st().positions(), c.q_dim()});
    CHECK(a.data == e.st().traced("layers.0.q")->data);

    const QString png = QString::fromStdString((dir / "view.png").string());
    REQUIRE(tv->savePng(png));
    CHECK(QImage(png).width() > 100);
}

TEST_CASE("a bad path is reported and leaves the open model in place, a new prompt reruns, a backend switch reopens", "[ui][widgets]") {
    test::ui_app();
    QStandardPaths::setTestModeEnabled(true);
    Explorer e;
    REQUIRE(e.openDemoCopy());
    const auto before = e.st().model();
    e.w.openPath("/nonexistent/strata-model");
    REQUIRE(wait_until([&] { return e.failures.count() == 1; }));
    CHECK(e.w.lastError().contains("/nonexistent/strata-model"));
    CHECK(e.st().model() == before);

    e.w.runPrompt("Hello");
    REQUIRE(wait_until([&] { return e.runs.count() == 2; }));
    CHECK(e.st().positions() == 2);  // <|begin_of_text|> Hello
    CHECK(e.w.chips()->count() == 2);

    // Another backend reopens the model; where Vulkan is missing the window says so and keeps to the CPU. Not
    // remembered: the test-mode settings are shared by every UI test process, and the later tests (run one after
    // another in this process, or beside it under ctest -j) would open on Vulkan or on the CPU by chance.
#ifdef STRATA_HAVE_VULKAN
    clear_vulkan_validation_messages();  // what earlier tests in this process recorded (one has no driver at all)
#endif
    e.w.setBackend("vulkan", false);
    REQUIRE(wait_until([&] { return e.loaded.count() == 2; }, 120000));
    const QString backend = e.st().model()->backend;
    CHECK((backend == "vulkan" || backend == "cpu"));
    if (backend == "cpu") CHECK(e.w.lastError().contains("vulkan"));
    REQUIRE(wait_until([&] { return e.runs.count() == 3; }, 120000));
#ifdef STRATA_HAVE_VULKAN
    if (backend == "vulkan") {
        // The run went through the validation layer (ui_app turns it on): it said nothing.
        const std::vector<std::string> messages = vulkan_validation_messages();
        for (const std::string& m : messages) UNSCOPED_INFO(m);
        CHECK(messages.empty());
    }
#endif
}

TEST_CASE("with no model chosen the demonstration model is written and opened", "[ui][widgets]") {
    test::ui_app();
    QStandardPaths::setTestModeEnabled(true);
    const std::filesystem::path cache = test::temp_dir("ui-cache");
    std::filesystem::create_directories(cache / "tokenizer");
    std::filesystem::create_symlink(test::tokenizer_json(), cache / "tokenizer" / "tokenizer.json");
    const QByteArray old = qgetenv("STRATA_CACHE_DIR");
    qputenv("STRATA_CACHE_DIR", QByteArray::fromStdString(cache.string()));
    {
        Explorer e;
        e.w.openDemo();
        REQUIRE(wait_until([&] { return e.loaded.count() == 1 || e.failures.count() > 0; }));
        INFO(e.w.lastError().toStdString());
        REQUIRE(e.loaded.count() == 1);
        CHECK(std::filesystem::exists(cache / "demo" / "config.json"));
        CHECK(e.st().model()->config.is_demo);
        CHECK(wait_until([&] { return e.runs.count() == 1; }));
        // The trained demo opens where docs/tour.md starts: the Attention view, at the strongest induction head of
        // the default prompt (which repeats a span).
        CHECK(e.w.tabs()->currentWidget() == e.w.attentionView());
        AttentionView* av = e.w.attentionView();
        REQUIRE(wait_until([&] { return av->strongestInductionHead().first >= 0; }));
        const auto [layer, head] = av->strongestInductionHead();
        CHECK(wait_until([&] { return e.st().layer() == layer && av->head() == head; }));
    }
    if (old.isEmpty()) qunsetenv("STRATA_CACHE_DIR");
    else qputenv("STRATA_CACHE_DIR", old);
}

TEST_CASE("a checkpoint with a NaN weight is refused naming the tensor, and the window goes on", "[ui][widgets]") {
    test::ui_app();
    QStandardPaths::setTestModeEnabled(true);
    // The golden model with one bf16 NaN in layers.1.attention.wo.
    namespace fs = std::filesystem;
    const fs::path dir = test::temp_dir("ui-nan") / "nan-model";
    fs::create_directories(dir);
    for (const char* f : {"config.json", "generation_config.json", "model.safetensors"})
        fs::copy_file(test::reference_dir() / "model" / f, dir / f);
    fs::permissions(dir / "model.safetensors", fs::perms::owner_write, fs::perm_options::add);
    fs::copy_file(test::tokenizer_json(), dir / "tokenizer.json");
    uint64_t offset = 0;
    {
        const auto m = strata::load_model(dir);
        offset = m->tensor("layers.1.attention.wo").file_offset + 2 * 77;
    }
    std::string bytes = test::read_file(dir / "model.safetensors");
    bytes[offset] = char(0xc0), bytes[offset + 1] = char(0x7f);  // bf16 quiet NaN, little-endian
    test::write_file(dir / "model.safetensors", bytes);

    Explorer e;
    e.w.openPath(QString::fromStdString(dir.string()));
    REQUIRE(wait_until([&] { return e.failures.count() >= 1; }));
    const QString message = e.failures.takeFirst().at(0).toString();
    INFO(message.toStdString());
    CHECK(message.contains("layers.1.attention.wo"));
    CHECK(message.contains("non-finite"));
    // The window still opens a good model afterwards.
    REQUIRE(e.openDemoCopy());
}
