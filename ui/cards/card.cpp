#include "cards/card.hpp"

#include <QDir>
#include <QFile>
#include <QGuiApplication>
#include <QPalette>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>

#include "views/plot_util.hpp"

namespace strata::ui {

namespace {

QString str(const QJsonObject& o, const char* key) { return o.value(QLatin1String(key)).toString(); }

bool readRange(const QJsonObject& o, int* first, int* last) {
    const QJsonArray a = o.value(QLatin1String("lines")).toArray();
    if (a.size() != 2) return false;
    *first = a[0].toInt();
    *last = a[1].toInt();
    return *first >= 1 && *last >= *first;
}

QString escaped(const QString& s) { return s.toHtmlEscaped(); }

}  // namespace

std::optional<Card> parseCard(const QByteArray& json, QString* error) {
    QJsonParseError pe;
    const QJsonDocument doc = QJsonDocument::fromJson(json, &pe);
    if (doc.isNull() || !doc.isObject()) {
        if (error) *error = QStringLiteral("not a JSON object: %1 at offset %2").arg(pe.errorString()).arg(pe.offset);
        return std::nullopt;
    }
    const QJsonObject o = doc.object();
    Card c;
    c.id = str(o, "id");
    c.kind = str(o, "kind");
    c.title = str(o, "title");
    c.tensor = str(o, "tensor");
    c.symbol = str(o, "symbol");
    c.meaning = str(o, "meaning");
    c.formula = str(o, "formula");
    c.notes = str(o, "notes");
    c.tiedNote = str(o, "tied_note");
    for (const QJsonValue v : o.value(QLatin1String("shape")).toArray()) {
        const QJsonObject d = v.toObject();
        c.shape.push_back(CardDim{str(d, "symbol"), str(d, "name"), str(d, "value")});
    }
    const QJsonObject p = o.value(QLatin1String("parameters")).toObject();
    c.paramScope = str(p, "scope");
    c.paramNote = str(p, "note");
    for (const QJsonValue v : p.value(QLatin1String("rows")).toArray()) {
        const QJsonObject r = v.toObject();
        CardParamRow row{str(r, "component"), {}};
        for (const QJsonValue f : r.value(QLatin1String("factors")).toArray()) row.factors << f.toString();
        c.params.push_back(row);
    }
    for (const QJsonValue v : o.value(QLatin1String("computed_by")).toArray()) {
        const QJsonObject s = v.toObject();
        CardSource src{str(s, "role"), str(s, "file"), 0, 0, str(s, "anchor")};
        if (!readRange(s, &src.first, &src.last)) {
            if (error) *error = QStringLiteral("%1: computed_by %2 has no valid \"lines\": [first, last]").arg(c.id, src.file);
            return std::nullopt;
        }
        c.computedBy.push_back(src);
    }
    for (const QJsonValue v : o.value(QLatin1String("reference")).toArray()) {
        const QJsonObject s = v.toObject();
        CardReference ref{str(s, "repo"), str(s, "revision"), str(s, "file"), 0, 0, str(s, "anchor"), str(s, "what")};
        if (!readRange(s, &ref.first, &ref.last)) {
            if (error) *error = QStringLiteral("%1: reference %2 has no valid \"lines\"").arg(c.id, ref.file);
            return std::nullopt;
        }
        c.reference.push_back(ref);
    }
    QStringList missing;
    if (c.id.isEmpty()) missing << "id";
    if (c.kind != QLatin1String("activation") && c.kind != QLatin1String("weight") && c.kind != QLatin1String("analysis"))
        missing << "kind (activation|weight|analysis)";
    if (c.title.isEmpty()) missing << "title";
    if (c.symbol.isEmpty()) missing << "symbol";
    if (c.meaning.isEmpty()) missing << "meaning";
    if (c.shape.empty()) missing << "shape";
    if (c.formula.isEmpty()) missing << "formula";
    if (c.paramScope.isEmpty()) missing << "parameters.scope";
    if (c.computedBy.empty()) missing << "computed_by";
    if (c.reference.empty()) missing << "reference";
    if (!missing.isEmpty()) {
        if (error) *error = QStringLiteral("%1: missing %2").arg(c.id.isEmpty() ? QStringLiteral("card") : c.id, missing.join(", "));
        return std::nullopt;
    }
    return c;
}

CardLibrary::CardLibrary() {
    const QDir dir(QStringLiteral(":/cards"));
    for (const QString& f : dir.entryList({QStringLiteral("*.json")}, QDir::Files, QDir::Name)) {
        QFile file(dir.filePath(f));
        if (!file.open(QIODevice::ReadOnly)) {
            errors_ << QStringLiteral("%1: cannot open").arg(f);
            continue;
        }
        QString error;
        std::optional<Card> card = parseCard(file.readAll(), &error);
        if (!card) {
            errors_ << QStringLiteral("%1: %2").arg(f, error);
            continue;
        }
        if (card->id + ".json" != f) errors_ << QStringLiteral("%1: its id is %2").arg(f, card->id);
        cards_[card->id] = *card;
    }
}

const CardLibrary& CardLibrary::instance() {
    static const CardLibrary lib;
    return lib;
}

const Card* CardLibrary::find(const QString& id) const {
    const auto it = cards_.find(id);
    return it == cards_.end() ? nullptr : &it->second;
}

QStringList CardLibrary::ids() const {
    QStringList out;
    for (const auto& [id, c] : cards_) out << id;
    return out;
}

std::optional<int64_t> contextValue(const QString& key, const CardContext& ctx) {
    bool isNumber = false;
    const qlonglong n = key.toLongLong(&isNumber);
    if (isNumber) return n;
    if (key == QLatin1String("N")) return ctx.layer;
    if (key == QLatin1String("N1")) return ctx.layer + 1;
    if (key == QLatin1String("T")) return ctx.T > 0 ? std::optional<int64_t>(ctx.T) : std::nullopt;
    if (key == QLatin1String("T0")) return ctx.T > 0 ? std::optional<int64_t>(ctx.pos0 + ctx.T) : std::nullopt;
    if (!ctx.config) return std::nullopt;
    const ModelConfig& c = *ctx.config;
    if (key == QLatin1String("dim")) return c.dim;
    if (key == QLatin1String("n_layers")) return c.n_layers;
    if (key == QLatin1String("n_heads")) return c.n_heads;
    if (key == QLatin1String("n_kv_heads")) return c.n_kv_heads;
    if (key == QLatin1String("head_dim")) return c.head_dim;
    if (key == QLatin1String("half_head_dim")) return c.head_dim / 2;
    if (key == QLatin1String("hidden_dim")) return c.hidden_dim;
    if (key == QLatin1String("vocab_size")) return c.vocab_size;
    if (key == QLatin1String("q_dim")) return c.q_dim();
    if (key == QLatin1String("kv_dim")) return c.kv_dim();
    if (key == QLatin1String("n_rep")) return c.n_rep();
    if (key == QLatin1String("dla_components")) return 1 + c.n_layers * (c.n_heads + 1);  // x0, heads, FFNs
    return std::nullopt;
}

QString expandPlaceholders(const QString& text, const CardContext& ctx) {
    static const QRegularExpression re(QStringLiteral("\\{([a-z_0-9A-Z]+)\\}"));
    QString out;
    qsizetype last = 0;
    for (auto it = re.globalMatch(text); it.hasNext();) {
        const QRegularExpressionMatch m = it.next();
        out += text.mid(last, m.capturedStart() - last);
        const QString key = m.captured(1);
        QString value;
        if (key == QLatin1String("eps") && ctx.config)
            value = QString::number(double(ctx.config->norm_eps), 'g', 6);
        else if (key == QLatin1String("theta") && ctx.config)
            value = QString::number(double(ctx.config->rope_theta), 'g', 8);
        else if (const auto v = contextValue(key, ctx))
            value = key.startsWith(QLatin1Char('N')) ? QString::number(*v) : groupDigits(uint64_t(*v));
        else
            value = key;  // unknown here (e.g. T before a run): keep the symbol
        out += value;
        last = m.capturedEnd();
    }
    out += text.mid(last);
    return out;
}

QString shapeLine(const Card& card, const CardContext& ctx) {
    QStringList named, concrete;
    for (const CardDim& d : card.shape) {
        named << QStringLiteral("%1 %2").arg(d.symbol, d.name);
        const auto v = contextValue(d.value, ctx);
        concrete << (v ? groupDigits(uint64_t(*v)) : d.symbol);
    }
    return QStringLiteral("[%1] = [%2]").arg(named.join(", "), concrete.join(", "));
}

ParamTotals parameterTotals(const Card& card, const CardContext& ctx) {
    ParamTotals t;
    for (const CardParamRow& r : card.params) {
        uint64_t p = 1;
        for (const QString& f : r.factors) p *= uint64_t(contextValue(f, ctx).value_or(0));
        t.perInstance += p;
    }
    t.instances = card.paramScope == QLatin1String("per_layer") && ctx.config ? uint64_t(ctx.config->n_layers)
                  : card.paramScope == QLatin1String("none")                  ? 0
                                                                              : 1;
    t.total = t.perInstance * t.instances;
    return t;
}

QString renderCardHtml(const Card& c, const CardContext& ctx) {
    // Secondary text and the table header from the system palette, so the card reads on light and dark themes.
    const QPalette pal = QGuiApplication::palette();
    const QString dim = pal.color(QPalette::PlaceholderText).name();
    const QString header = pal.color(QPalette::AlternateBase).name();
    QString h;
    h += QStringLiteral("<h2 style='margin-bottom:2px'>%1 &nbsp;<span style='font-family:serif; font-style:italic'>%2</span></h2>")
             .arg(escaped(c.title), expandPlaceholders(c.symbol, ctx));
    h += QStringLiteral("<p style='margin-top:0; color:%3'><code>%1</code> &middot; %2</p>")
             .arg(escaped(expandPlaceholders(c.tensor, ctx)), c.kind, dim);
    h += QStringLiteral("<p>%1</p>").arg(expandPlaceholders(c.meaning, ctx));

    h += QStringLiteral("<h3>Shape</h3><p><span style='font-family:serif; font-style:italic'>%1</span> %2</p>")
             .arg(expandPlaceholders(c.symbol, ctx), shapeLine(c, ctx));  // card symbols carry sub/superscripts

    h += QStringLiteral("<h3>Formula</h3><p style='font-family:serif; font-size:large'>%1</p>").arg(expandPlaceholders(c.formula, ctx));

    h += QStringLiteral("<h3>Parameters</h3>");
    if (c.paramScope == QLatin1String("none") || c.params.empty()) {
        h += c.kind == QLatin1String("analysis") ? QStringLiteral("<p>None: computed from runs of the model.</p>")
                                                 : QStringLiteral("<p>None: an activation, computed from the weights named below.</p>");
    } else {
        const ParamTotals t = parameterTotals(c, ctx);
        h += QStringLiteral("<table cellspacing='0' cellpadding='3' border='0' width='100%'>"
                            "<tr style='background:%1'><th align='left'>component</th><th align='left'>calculation</th>"
                            "<th align='right'>parameters</th></tr>")
                 .arg(header);
        for (const CardParamRow& r : c.params) {
            QStringList calc;
            uint64_t p = 1;
            for (const QString& f : r.factors) {
                const int64_t v = contextValue(f, ctx).value_or(0);
                calc << QStringLiteral("%1 %2").arg(groupDigits(uint64_t(v)), escaped(f));
                p *= uint64_t(v);
            }
            h += QStringLiteral("<tr><td>%1</td><td>%2</td><td align='right'>%3</td></tr>")
                     .arg(r.component, calc.join(QStringLiteral(" &times; ")), groupDigits(p));
        }
        h += QStringLiteral("<tr><td><b>per instance</b></td><td></td><td align='right'><b>%1</b></td></tr>").arg(groupDigits(t.perInstance));
        if (c.paramScope == QLatin1String("per_layer"))
            h += QStringLiteral("<tr><td><b>all %1 layers</b></td><td>%2 &times; %1</td><td align='right'><b>%3</b></td></tr>")
                     .arg(t.instances)
                     .arg(groupDigits(t.perInstance), groupDigits(t.total));
        h += QStringLiteral("</table>");
    }
    if (!c.paramNote.isEmpty()) h += QStringLiteral("<p style='color:%2'>%1</p>").arg(expandPlaceholders(c.paramNote, ctx), dim);
    if (ctx.config && ctx.config->tie_embeddings && !c.tiedNote.isEmpty())
        h += QStringLiteral("<p><b>Tied embeddings:</b> %1</p>").arg(expandPlaceholders(c.tiedNote, ctx));
    if (!c.notes.isEmpty()) h += QStringLiteral("<p>%1</p>").arg(expandPlaceholders(c.notes, ctx));

    h += QStringLiteral("<h3>Computed by (Strata)</h3><ul style='margin-left:-20px'>");
    for (size_t i = 0; i < c.computedBy.size(); ++i) {
        const CardSource& s = c.computedBy[i];
        h += QStringLiteral("<li><a href='source:%1'>%2 %3\u2013%4</a> <span style='color:%7'>(%5)</span><br/><code>%6</code></li>")
                 .arg(i)
                 .arg(escaped(s.file))
                 .arg(s.first)
                 .arg(s.last)
                 .arg(escaped(s.role), escaped(s.anchor), dim);
    }
    h += QStringLiteral("</ul>");

    h += QStringLiteral("<h3>Reference</h3><ul style='margin-left:-20px'>");
    for (const CardReference& r : c.reference) {
        const QString url = QStringLiteral("https://github.com/%1/blob/%2/%3#L%4-L%5").arg(r.repo, r.revision, r.file).arg(r.first).arg(r.last);
        h += QStringLiteral("<li>%1<br/><a href='%2'>%3 @ %4 &middot; %5 %6\u2013%7</a><br/><code>%8</code></li>")
                 .arg(escaped(r.what), url, escaped(r.repo), escaped(r.revision), escaped(r.file))
                 .arg(r.first)
                 .arg(r.last)
                 .arg(escaped(r.anchor));
    }
    h += QStringLiteral("</ul>");
    return h;
}

QStringList embeddedSourceLines(const QString& file) {
    QFile f(QStringLiteral(":/source/") + file);
    if (!f.open(QIODevice::ReadOnly)) return {};
    return QString::fromUtf8(f.readAll()).split(QLatin1Char('\n'));
}

QString checkCitation(const CardSource& s, const QStringList& lines) {
    if (lines.isEmpty()) return QStringLiteral("%1 is not embedded").arg(s.file);
    if (s.first < 1 || s.last > lines.size() || s.first > s.last)
        return QStringLiteral("%1 %2-%3: the file has %4 lines").arg(s.file).arg(s.first).arg(s.last).arg(lines.size());
    const QString range = lines.mid(s.first - 1, s.last - s.first + 1).join(QLatin1Char('\n'));
    if (!range.contains(s.anchor)) {
        // Say where the anchor went, so that updating the card's "lines" is a one-line edit.
        QStringList seen;
        for (int i = 0; i < lines.size(); ++i)
            if (lines[i].contains(s.anchor)) seen << QString::number(i + 1);
        return QStringLiteral("%1 %2-%3 no longer contains \u201c%4\u201d (%5)")
            .arg(s.file)
            .arg(s.first)
            .arg(s.last)
            .arg(s.anchor, seen.isEmpty() ? QStringLiteral("not found in the file") : QStringLiteral("now at line ") + seen.join(", "));
    }
    return {};
}

}  // namespace strata::ui
