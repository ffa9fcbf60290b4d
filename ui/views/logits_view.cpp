#include "views/logits_view.hpp"

#include <algorithm>
#include <cmath>

#include <QLabel>
#include <QMouseEvent>
#include <QPainter>

#include "views/plot_util.hpp"

namespace strata::ui {

LogitsView::LogitsView(ExplorerState* state, EngineClient* client, QWidget* parent)
    : ViewPage(tr("Logits"), state, client, parent) {
    heading_ = new QLabel;
    controls()->addWidget(heading_, 1);
    bars_ = new TopKBars;
    setCanvas(bars_);
    setReadout(tr("The most likely next tokens at the selected position (bars relative to the first); the prompt's actual next token is highlighted."));
    connect(bars_, &TopKBars::hoverChanged, this, [this](const QString& s) {
        if (!s.isEmpty()) setReadout(s);
    });
    connect(state_, &ExplorerState::runChanged, this, &LogitsView::refresh);
    connect(state_, &ExplorerState::positionChanged, this, &LogitsView::refresh);
}

bool LogitsView::hasContent() const { return !bars_->rows().empty(); }

void LogitsView::refresh() {
    const RunResultPtr& run = state_->run();
    if (!run) {
        heading_->clear();
        bars_->setRows({}, tr("Run a prompt to see the next-token distribution."));
        return;
    }
    const int pos = std::clamp(state_->position(), 0, int(run->tokens.size()) - 1);
    if (pos >= int(run->trace.top_k.size())) {
        bars_->setRows({}, tr("No logits were kept for position %1.").arg(pos));
        return;
    }
    const double lse = pos < int(run->logSumExp.size()) ? run->logSumExp[size_t(pos)] : NAN;
    const int32_t next = pos + 1 < int(run->tokens.size()) ? run->tokens[size_t(pos + 1)] : -1;
    std::vector<TopKRow> rows;
    int nextRank = -1;
    for (const TokenScore& s : run->trace.top_k[size_t(pos)]) {
        TopKRow r;
        r.id = s.id;
        r.text = run->vocabText.count(s.id) ? run->vocabText.at(s.id) : QString::number(s.id);
        r.logit = s.logit;
        r.prob = std::isnan(lse) ? NAN : std::exp(double(s.logit) - lse);
        r.actualNext = s.id == next;
        if (r.actualNext) nextRank = int(rows.size());
        rows.push_back(r);
    }
    QString nextText;
    if (next >= 0)
        nextText = nextRank >= 0 ? tr(" \u00b7 the prompt continues with \u2018%1\u2019 (rank %2)").arg(run->tokenTexts.value(pos + 1)).arg(nextRank)
                                 : tr(" \u00b7 the prompt continues with \u2018%1\u2019 (not in the top %2)").arg(run->tokenTexts.value(pos + 1)).arg(rows.size());
    heading_->setText(tr("after position %1 \u2018%2\u2019 \u00b7 entropy %3 nats%4")
                          .arg(pos)
                          .arg(run->tokenTexts.value(pos))
                          .arg(pos < int(run->entropy.size()) ? QString::number(run->entropy[size_t(pos)], 'f', 3) : QStringLiteral("?"))
                          .arg(nextText));
    bars_->setRows(std::move(rows));
}

ViewPage::TensorExport LogitsView::tensorExport() const {
    TensorExport e;
    e.name = QStringLiteral("logits");
    if (const TracedTensor* t = state_->traced(e.name)) {
        e.data = t->data;
        e.shape = {t->rows, t->cols};
        return e;
    }
    // Full rows were not kept (long prompt): export the top-k logits of the selected position.
    e.name = QStringLiteral("logits_topk_position_%1").arg(state_->position());
    for (const TopKRow& r : bars_->rows()) e.data.push_back(r.logit);
    if (!e.data.empty()) e.shape = {int64_t(e.data.size())};
    return e;
}

// ---------------------------------------------------------------------------------------------- bars

TopKBars::TopKBars(QWidget* parent) : QWidget(parent) { setMouseTracking(true); }

void TopKBars::setRows(std::vector<TopKRow> rows, const QString& message) {
    rows_ = std::move(rows);
    message_ = message;
    update();
}

int TopKBars::rowHeight() const {
    const QFontMetrics fm(font());
    return rows_.empty() ? 0 : std::clamp(height() / int(rows_.size()), fm.height() + 2, 2 * fm.height() + 8);
}

void TopKBars::paintEvent(QPaintEvent*) {
    QPainter g(this);
    g.fillRect(rect(), palette().base());
    if (rows_.empty()) {
        g.setPen(palette().color(QPalette::PlaceholderText));
        g.drawText(rect(), Qt::AlignCenter, message_);
        return;
    }
    const QFontMetrics fm(font());
    const int rh = rowHeight();
    const int rankW = fm.horizontalAdvance(QStringLiteral("000")) + 8;
    int textW = 0;
    for (const TopKRow& r : rows_) textW = std::max(textW, fm.horizontalAdvance(r.text));
    textW = std::min(textW + 12, width() / 4);
    const int idW = fm.horizontalAdvance(QStringLiteral("000000")) + 12;
    const int numW = fm.horizontalAdvance(QStringLiteral("p 1.00e-05  logit -00.00")) + 12;
    const int barX = rankW + textW + idW;
    const int barW = std::max(20, width() - barX - numW);
    double top = 0;
    for (const TopKRow& r : rows_) top = std::max(top, std::isnan(r.prob) ? 0.0 : r.prob);
    if (!(top > 0)) top = 1;
    for (int i = 0; i < int(rows_.size()); ++i) {
        const TopKRow& r = rows_[size_t(i)];
        const QRect row(0, i * rh, width(), rh);
        if (r.actualNext) g.fillRect(row, QColor(0xff, 0xe0, 0x8a, 140));
        g.setPen(palette().color(QPalette::PlaceholderText));
        g.drawText(QRect(0, row.top(), rankW - 4, rh), Qt::AlignRight | Qt::AlignVCenter, QString::number(i));
        g.setPen(palette().color(QPalette::Text));
        g.drawText(QRect(rankW, row.top(), textW - 6, rh), Qt::AlignLeft | Qt::AlignVCenter, fm.elidedText(r.text, Qt::ElideRight, textW - 6));
        g.setPen(palette().color(QPalette::PlaceholderText));
        g.drawText(QRect(rankW + textW, row.top(), idW - 6, rh), Qt::AlignRight | Qt::AlignVCenter, QString::number(r.id));
        const double f = std::isnan(r.prob) ? 0 : r.prob / top;
        g.fillRect(QRectF(barX, row.top() + rh * 0.2, std::max(1.0, f * barW), rh * 0.6), QColor(0x1f, 0x5f, 0xa8));
        g.setPen(palette().color(QPalette::Text));
        g.drawText(QRect(barX + barW + 6, row.top(), numW - 6, rh), Qt::AlignLeft | Qt::AlignVCenter,
                   QStringLiteral("p %1  logit %2").arg(formatValue(r.prob)).arg(double(r.logit), 0, 'f', 2));
    }
}

void TopKBars::mouseMoveEvent(QMouseEvent* e) {
    const int rh = rowHeight();
    if (rh == 0) return;
    const int i = int(e->position().y()) / rh;
    if (i < 0 || i >= int(rows_.size())) return;
    const TopKRow& r = rows_[size_t(i)];
    emit hoverChanged(tr("rank %1 \u00b7 \u2018%2\u2019 (id %3) \u00b7 logit %4 \u00b7 p = %5%6")
                          .arg(i)
                          .arg(r.text)
                          .arg(r.id)
                          .arg(formatValue(r.logit), formatValue(r.prob))
                          .arg(r.actualNext ? tr(" \u00b7 the prompt's next token") : QString()));
}

}  // namespace strata::ui
