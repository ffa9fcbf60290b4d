#pragma once
// Annotation cards: data in resources/cards/<id>.json (embedded at :/cards/), one per traced tensor and per
// weight, in the manner of the OpenModelAtlas pages: name and symbol, one-line meaning, shape with named and
// concrete dimensions, formula, exact parameter accounting, the Strata source lines that compute it (embedded
// at :/source/<path> at build time) and the pinned reference lines in Meta's model.py.
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include <QString>
#include <QStringList>

#include "strata/config.hpp"

namespace strata::ui {

struct CardDim {
    QString symbol;  // "T"
    QString name;    // "positions"
    QString value;   // a number, or a config/run key: "dim", "T", "T0", "head_dim", ...
};

struct CardParamRow {
    QString component;   // "Learned gain \u03b3"
    QStringList factors;  // keys or numbers, multiplied: ["vocab_size", "dim"]
};

struct CardSource {
    QString role;     // "host", "cpu kernel", "shader"
    QString file;     // repository path: "engine/src/transformer.cpp"
    int first = 0;    // 1-based, inclusive
    int last = 0;
    QString anchor;   // text that must appear within [first, last]
};

struct CardReference {
    QString repo;      // "meta-llama/llama3"
    QString revision;  // "a0940f9"
    QString file;      // "llama/model.py"
    int first = 0, last = 0;
    QString anchor;    // the line of reference code that identifies the range
    QString what;      // what the lines are: "RMSNorm"
};

struct Card {
    QString id;
    QString kind;      // "activation", "weight" or "analysis" (a view computed from runs: compare, attribution)
    QString title;
    QString tensor;    // canonical name pattern ("layers.{N}.q")
    QString symbol;    // HTML ("x<sub>0</sub>")
    QString meaning;
    std::vector<CardDim> shape;
    QString formula;   // HTML with {keys}
    QString paramScope;  // "none", "instance" (once in the model), "per_layer"
    std::vector<CardParamRow> params;
    QString paramNote;
    QString notes;       // HTML
    QString tiedNote;    // shown only for tied-embedding models
    std::vector<CardSource> computedBy;
    std::vector<CardReference> reference;
};

// What a card is rendered against: the live config, the run's length, the selected layer.
struct CardContext {
    const ModelConfig* config = nullptr;
    int64_t T = 0;      // positions of the last run (0: none yet)
    int64_t pos0 = 0;
    int layer = 0;
};

// Parses one card; on failure returns nullopt and says why.
std::optional<Card> parseCard(const QByteArray& json, QString* error);

class CardLibrary {
public:
    // The cards embedded at :/cards/.
    static const CardLibrary& instance();
    const Card* find(const QString& id) const;
    QStringList ids() const;
    QStringList errors() const { return errors_; }

private:
    CardLibrary();
    std::map<QString, Card> cards_;
    QStringList errors_;
};

// A dimension or factor key's value under the context (nullopt: unknown key, or T without a run).
std::optional<int64_t> contextValue(const QString& key, const CardContext& ctx);
// Replaces {key} placeholders (numbers with thousands separators, eps and theta as written in the config).
QString expandPlaceholders(const QString& text, const CardContext& ctx);
// "[B batch, T positions, d features] = [1, 7, 4096]"
QString shapeLine(const Card& card, const CardContext& ctx);
// The exact parameter total of the card (per instance and, per layer, across layers).
struct ParamTotals {
    uint64_t perInstance = 0;
    uint64_t instances = 0;
    uint64_t total = 0;
};
ParamTotals parameterTotals(const Card& card, const CardContext& ctx);
// The whole card as rich text for QTextBrowser; source links are "source:<i>".
QString renderCardHtml(const Card& card, const CardContext& ctx);

// The embedded copy of a cited Strata file (":/source/<file>"), split in lines; empty when not embedded.
QStringList embeddedSourceLines(const QString& file);
// Checks that the cited range exists and contains the anchor; returns an empty string when it does.
QString checkCitation(const CardSource& source, const QStringList& lines);

}  // namespace strata::ui
