// The atlas item model: structure in model.py's names, exact parameter counts, and Qt's model contract
// (QAbstractItemModelTester), on the golden model and the demonstration model.
#include <QAbstractItemModelTester>

#include "catch.hpp"
#include "explorer/atlas_model.hpp"
#include "strata/backend.hpp"
#include "strata/model.hpp"
#include "support.hpp"
#include "ui_support.hpp"
#include "views/plot_util.hpp"
#include "worker/engine_worker.hpp"

using namespace strata;
using namespace strata::ui;

namespace {

ModelSummaryPtr summaryOf(const Model& m) { return EngineWorker::summarize(m, BackendInfo{"cpu", "test", "cpu", "", ""}, {}); }

// Qt's tester reports through qWarning in Warning mode: collect its complaints.
QStringList* g_warnings = nullptr;
void collect(QtMsgType type, const QMessageLogContext&, const QString& msg) {
    if (g_warnings && type >= QtWarningMsg) *g_warnings << msg;
}

uint64_t numel(const Model& m, const std::string& name) { return uint64_t(m.tensor(name).numel()); }

}  // namespace

TEST_CASE("the atlas names the parts as model.py does and counts their parameters exactly", "[ui][atlas]") {
    test::ui_app();
    const auto model = load_model(test::golden_hf_dir());
    const ModelConfig& c = model->config;
    AtlasModel atlas;
    QStringList warnings;
    g_warnings = &warnings;
    const QtMessageHandler previous = qInstallMessageHandler(collect);
    {
        QAbstractItemModelTester tester(&atlas, QAbstractItemModelTester::FailureReportingMode::Warning);
        atlas.setSummary(summaryOf(*model));

        REQUIRE(atlas.rowCount() == 1);
        const QModelIndex root = atlas.index(0, 0);
        CHECK(atlas.data(root).toString() == "Transformer");
        // tok_embeddings, layers.0 .. layers.{N-1}, norm, output
        REQUIRE(atlas.rowCount(root) == c.n_layers + 3);
        CHECK(atlas.data(atlas.index(0, 0, root)).toString() == "tok_embeddings");
        CHECK(atlas.data(atlas.index(1, 0, root)).toString() == "layers.0");
        CHECK(atlas.data(atlas.index(int(c.n_layers) + 1, 0, root)).toString() == "norm");
        CHECK(atlas.data(atlas.index(int(c.n_layers) + 2, 0, root)).toString() == "output");

        const QModelIndex block = atlas.index(1, 0, root);
        QStringList parts;
        for (int r = 0; r < atlas.rowCount(block); ++r) parts << atlas.data(atlas.index(r, 0, block)).toString();
        CHECK(parts == QStringList{"attention_norm", "attention", "ffn_norm", "feed_forward"});
        const QModelIndex attention = atlas.index(1, 0, block);
        QStringList att;
        for (int r = 0; r < atlas.rowCount(attention); ++r) att << atlas.data(atlas.index(r, 0, attention)).toString();
        CHECK(att == QStringList{"wq", "wk", "wv", "RoPE", "scores + softmax", "heads", "wo", "residual add"});
        const QModelIndex ffn = atlas.index(3, 0, block);
        QStringList ff;
        for (int r = 0; r < atlas.rowCount(ffn); ++r) ff << atlas.data(atlas.index(r, 0, ffn)).toString();
        CHECK(ff == QStringList{"w1", "w3", "SiLU and product", "w2", "residual add"});

        // Exact counts: the model's own total, each block the sum of its tensors.
        CHECK(atlas.parameters(root) == model->parameter_count());
        for (int l = 0; l < c.n_layers; ++l) {
            uint64_t expected = 0;
            for (const char* s : {"attention_norm", "attention.wq", "attention.wk", "attention.wv", "attention.wo", "ffn_norm",
                                  "feed_forward.w1", "feed_forward.w2", "feed_forward.w3"})
                expected += numel(*model, names::layer(l, s));
            CHECK(atlas.parameters(atlas.index(l + 1, 0, root)) == expected);
        }
        CHECK(atlas.parameters(attention) == numel(*model, "layers.0.attention.wq") + numel(*model, "layers.0.attention.wk") +
                                                 numel(*model, "layers.0.attention.wv") + numel(*model, "layers.0.attention.wo"));
        CHECK(atlas.data(atlas.index(0, AtlasModel::ParamsColumn, attention)).toString() ==
              groupDigits(uint64_t(c.q_dim() * c.dim)));

        // Names resolve per block; find() walks to the same part in another block.
        const QModelIndex wq1 = atlas.find("block/attention/wq", 1);
        REQUIRE(wq1.isValid());
        CHECK(atlas.data(wq1, AtlasModel::WeightRole).toString() == "layers.1.attention.wq");
        CHECK(atlas.data(wq1, AtlasModel::TensorRole).toString() == "layers.1.q");
        CHECK(atlas.layer(wq1) == 1);
        CHECK(atlas.part(wq1).weightCard == "w_wq");
        CHECK(atlas.data(atlas.find("block/feed_forward/residual", 2), AtlasModel::TensorRole).toString() == "h.2");
        CHECK(atlas.data(atlas.find("tok_embeddings", -1), AtlasModel::TensorRole).toString() == "x0");
        CHECK_FALSE(atlas.find("block/attention/wq", int(c.n_layers)).isValid());

        // A second model resets the tree under the tester's eyes.
        atlas.setSummary(summaryOf(*load_model(test::demo_model())));
        CHECK(atlas.rowCount(atlas.index(0, 0)) == 4 + 3);
        atlas.setSummary(nullptr);
        CHECK(atlas.rowCount() == 0);
    }
    qInstallMessageHandler(previous);
    g_warnings = nullptr;
    INFO(warnings.join("\n").toStdString());
    CHECK(warnings.isEmpty());
}

TEST_CASE("a tied model's output owns no parameters of its own", "[ui][atlas]") {
    test::ui_app();
    const auto model = load_model(test::demo_model());
    AtlasModel atlas;
    atlas.setSummary(summaryOf(*model));
    const QModelIndex output = atlas.find("output", -1);
    REQUIRE(output.isValid());
    if (model->config.tie_embeddings) {
        CHECK(atlas.parameters(output) == 0);
        CHECK(atlas.data(output, AtlasModel::WeightRole).toString() == "tok_embeddings");
    } else {
        CHECK(atlas.parameters(output) == uint64_t(model->tensor("output").numel()));
    }
    CHECK(atlas.parameters(atlas.index(0, 0)) == model->parameter_count());
}
