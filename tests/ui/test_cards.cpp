// Annotation cards: every card parses, every part of the atlas has its cards, every "computed by" citation still
// contains its anchor (in the source tree and in the copy embedded in the binary), and the parameter accounting
// adds up to Llama 3 8B's published total.
#include <QFile>

#include "cards/card.hpp"
#include "catch.hpp"
#include "explorer/atlas_model.hpp"
#include "strata/backend.hpp"
#include "strata/model.hpp"
#include "support.hpp"
#include "ui_support.hpp"
#include "worker/engine_worker.hpp"

using namespace strata;
using namespace strata::ui;

namespace {

ModelConfig llama3_8b() {
    ModelConfig c;
    c.dim = 4096;
    c.n_layers = 32;
    c.n_heads = 32;
    c.n_kv_heads = 8;
    c.head_dim = 128;
    c.hidden_dim = 14336;
    c.vocab_size = 128256;
    c.norm_eps = 1e-5f;
    c.rope_theta = 500000.0f;
    return c;
}

QStringList diskLines(const QString& file) {
    QFile f(QStringLiteral(STRATA_SOURCE_DIR "/") + file);
    if (!f.open(QIODevice::ReadOnly)) return {};
    return QString::fromUtf8(f.readAll()).split(QLatin1Char('\n'));
}

}  // namespace

TEST_CASE("every card parses and the required cards exist", "[ui][cards]") {
    test::ui_app();
    const CardLibrary& lib = CardLibrary::instance();
    INFO(lib.errors().join("\n").toStdString());
    CHECK(lib.errors().isEmpty());
    for (const char* id : {"x0", "attention_norm", "q", "k", "v", "rope", "attention_probs", "attention_out", "h_mid", "ffn_norm",
                           "ffn_hidden", "ffn_out", "h", "norm", "logits", "w_tok_embeddings", "w_wq", "w_wk", "w_wv", "w_wo",
                           "w_w1", "w_w2", "w_w3", "w_attention_norm", "w_ffn_norm", "w_norm", "w_output", "attention_heads",
                           "compare", "attribution"}) {
        INFO(id);
        CHECK(lib.find(id) != nullptr);
    }
}

TEST_CASE("every cited Strata source range still contains its anchor", "[ui][cards]") {
    test::ui_app();
    const CardLibrary& lib = CardLibrary::instance();
    int citations = 0;
    for (const QString& id : lib.ids()) {
        const Card& card = *lib.find(id);
        for (const CardSource& s : card.computedBy) {
            INFO(id.toStdString() << ": " << s.file.toStdString() << " " << s.first << "-" << s.last << " anchor " << s.anchor.toStdString());
            // The tree as it is now, and the copy built into the binary (what the card panel shows).
            CHECK(checkCitation(s, diskLines(s.file)).toStdString() == "");
            CHECK(checkCitation(s, embeddedSourceLines(s.file)).toStdString() == "");
            CHECK(embeddedSourceLines(s.file) == diskLines(s.file));
            ++citations;
        }
        for (const CardReference& r : card.reference) {
            INFO(id.toStdString() << ": reference " << r.file.toStdString());
            CHECK(r.repo == "meta-llama/llama3");
            CHECK(r.revision == "a0940f9");
            CHECK(r.file == "llama/model.py");
            CHECK(r.first >= 1);
            CHECK(r.last <= 302);  // model.py at a0940f9 has 302 lines
            CHECK_FALSE(r.anchor.isEmpty());
        }
    }
    CHECK(citations > 40);
}

TEST_CASE("a citation that moved is reported", "[ui][cards]") {
    const CardSource s{"host", "f.cpp", 2, 3, "b.add(x"};
    CHECK(checkCitation(s, {"a", "b.add(x, y)", "c"}).isEmpty());
    CHECK(checkCitation(s, {"a", "b", "c", "b.add(x, y)"}).contains("now at line 4"));
    CHECK_FALSE(checkCitation(s, {"a"}).isEmpty());
    CHECK_FALSE(checkCitation(s, {}).isEmpty());
}

TEST_CASE("cards render shapes and parameters from the live config", "[ui][cards]") {
    test::ui_app();
    const ModelConfig c = llama3_8b();
    CardContext ctx{&c, 7, 0, 3};
    const CardLibrary& lib = CardLibrary::instance();
    CHECK(shapeLine(*lib.find("x0"), ctx) == "[B batch, T positions, d features] = [1, 7, 4,096]");
    CHECK(shapeLine(*lib.find("attention_probs"), ctx) == "[B batch, H heads, T queries, S keys] = [1, 32, 7, 7]");
    CardContext noRun{&c, 0, 0, 3};
    CHECK(shapeLine(*lib.find("x0"), noRun) == "[B batch, T positions, d features] = [1, T, 4,096]");

    // The weight cards add up to Llama 3 8B's 8,030,261,248 parameters.
    uint64_t total = 0;
    for (const char* id : {"w_tok_embeddings", "w_wq", "w_wk", "w_wv", "w_wo", "w_w1", "w_w2", "w_w3", "w_attention_norm",
                           "w_ffn_norm", "w_norm", "w_output"})
        total += parameterTotals(*lib.find(id), ctx).total;
    CHECK(total == 8030261248ull);
    CHECK(parameterTotals(*lib.find("w_wk"), ctx).perInstance == 1024ull * 4096);
    CHECK(parameterTotals(*lib.find("attention_probs"), ctx).total == 0);

    const QString html = renderCardHtml(*lib.find("h"), ctx);
    CHECK(html.contains("x<sub>4</sub>"));  // block 3's output is x4
    CHECK(html.contains("layers.3") == false);  // h.N names the block output
    CHECK(html.contains("h.3"));
    CHECK(html.contains("a0940f9"));
    CHECK(renderCardHtml(*lib.find("attention_norm"), ctx).contains("1e-05"));
}

TEST_CASE("every part of the atlas has the cards it names", "[ui][cards]") {
    test::ui_app();
    const auto model = load_model(test::golden_hf_dir());
    AtlasModel atlas;
    atlas.setSummary(EngineWorker::summarize(*model, BackendInfo{"cpu", "test", "cpu", "", ""}, {}));
    std::function<void(const QModelIndex&)> walk = [&](const QModelIndex& parent) {
        for (int r = 0; r < atlas.rowCount(parent); ++r) {
            const QModelIndex i = atlas.index(r, 0, parent);
            const Part p = atlas.part(i);
            INFO(p.key.toStdString());
            if (!p.tensorCard.isEmpty()) CHECK(CardLibrary::instance().find(p.tensorCard) != nullptr);
            if (!p.weightCard.isEmpty()) CHECK(CardLibrary::instance().find(p.weightCard) != nullptr);
            CHECK((!p.tensorCard.isEmpty() || !p.weightCard.isEmpty()));
            walk(i);
        }
    };
    walk({});
}
