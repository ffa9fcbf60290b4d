#include "logits/distribution_plots.hpp"

#include <algorithm>
#include <cmath>

#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>

#include "logits/distribution.hpp"
#include "logits/token_table_model.hpp"
#include "views/plot_util.hpp"

namespace strata::ui {

namespace {
const QColor kModel(0x1f, 0x5f, 0xa8);
const QColor kSampled(0xe0, 0x8a, 0x00);
const QColor kRemoved(0xc5, 0xca, 0xd0);
const QColor kHighlight(0xff, 0xe0, 0x8a);
const QColor kSurvivorShade(0xff, 0xf1, 0xdb);
}  // namespace

// ---------------------------------------------------------------------------------------------- bars

DistributionBars::DistributionBars(QWidget* parent) : QWidget(parent) { setMouseTracking(true); }

void DistributionBars::setData(const LogitsDistribution* d, const VocabularyPtr& vocab, int rows, int32_t highlight) {
    dist_ = d;
    vocab_ = vocab;
    rows_ = d && !d->empty() ? int(std::min<int64_t>(rows, d->size())) : 0;
    highlight_ = highlight;
    update();
}

int DistributionBars::headerHeight() const { return QFontMetrics(font()).height() + 8; }

int DistributionBars::rowHeight() const {
    const QFontMetrics fm(font());
    return rows_ == 0 ? 0 : std::clamp((height() - headerHeight()) / rows_, fm.height() + 2, 2 * fm.height() + 6);
}

void DistributionBars::paintEvent(QPaintEvent*) {
    QPainter g(this);
    g.fillRect(rect(), palette().base());
    const QFontMetrics fm(font());
    if (rows_ == 0) {
        g.setPen(palette().color(QPalette::PlaceholderText));
        g.drawText(rect(), Qt::AlignCenter, tr("No distribution yet"));
        return;
    }
    // Legend.
    int x = 6;
    const int ly = 4;
    for (const auto& [colour, label] : {std::pair{kModel, tr("model")}, std::pair{kSampled, tr("after settings")},
                                        std::pair{kRemoved, tr("removed")}}) {
        g.fillRect(QRect(x, ly + 3, 12, fm.height() - 6), colour);
        x += 16;
        g.setPen(palette().color(QPalette::Text));
        g.drawText(QRect(x, ly, fm.horizontalAdvance(label) + 2, fm.height()), Qt::AlignLeft | Qt::AlignVCenter, label);
        x += fm.horizontalAdvance(label) + 14;
    }
    const int top = headerHeight();
    const int rh = rowHeight();
    const int rankW = fm.horizontalAdvance(QStringLiteral("0000")) + 6;
    int textW = 0;
    for (int i = 0; i < rows_; ++i) textW = std::max(textW, fm.horizontalAdvance(vocab_ ? vocab_->displayOf(dist_->idAt(i)) : QString()));
    textW = std::clamp(textW + 10, 60, width() / 4);
    auto numbers = [&](int32_t id) {
        return dist_->survives(id) ? QStringLiteral("%1 \u2192 %2").arg(formatPercent(dist_->prob(id)), formatPercent(dist_->sampledProb(id)))
                                   : QStringLiteral("%1 \u2192 \u2717").arg(formatPercent(dist_->prob(id)));
    };
    int numW = 0;
    for (int i = 0; i < rows_; ++i) numW = std::max(numW, fm.horizontalAdvance(numbers(dist_->idAt(i))) + 10);
    const int barX = rankW + textW;
    // The table beside has the numbers: when narrow, the bars get the room.
    if (width() - barX - numW < 140) numW = 0;
    const int barW = std::max(20, width() - barX - numW);
    double top1 = 0;
    for (int i = 0; i < rows_; ++i) {
        const int32_t id = dist_->idAt(i);
        top1 = std::max({top1, dist_->prob(id), double(dist_->sampledProb(id))});
    }
    if (!(top1 > 0)) top1 = 1;
    for (int i = 0; i < rows_; ++i) {
        const int32_t id = dist_->idAt(i);
        const QRect row(0, top + i * rh, width(), rh);
        if (id == highlight_) g.fillRect(row, kHighlight);
        const bool survives = dist_->survives(id);
        g.setPen(palette().color(QPalette::PlaceholderText));
        g.drawText(QRect(0, row.top(), rankW - 4, rh), Qt::AlignRight | Qt::AlignVCenter, QString::number(i + 1));
        g.setPen(survives ? palette().color(QPalette::Text) : palette().color(QPalette::PlaceholderText));
        const QString text = vocab_ ? vocab_->displayOf(id) : QStringLiteral("#%1").arg(id);
        g.drawText(QRect(rankW, row.top(), textW - 6, rh), Qt::AlignLeft | Qt::AlignVCenter, fm.elidedText(text, Qt::ElideRight, textW - 6));
        const double half = rh * 0.36;
        const double y0 = row.top() + rh * 0.12;
        g.fillRect(QRectF(barX, y0, std::max(1.0, dist_->prob(id) / top1 * barW), half), survives ? kModel : kRemoved);
        if (survives) g.fillRect(QRectF(barX, y0 + half + 1, std::max(1.0, dist_->sampledProb(id) / top1 * barW), half), kSampled);
        g.setPen(palette().color(QPalette::Text));
        if (numW > 0) g.drawText(QRect(barX + barW + 6, row.top(), numW - 6, rh), Qt::AlignLeft | Qt::AlignVCenter, numbers(id));
    }
}

void DistributionBars::mouseMoveEvent(QMouseEvent* e) {
    const int rh = rowHeight();
    if (rh == 0) return;
    const int i = (int(e->position().y()) - headerHeight()) / rh;
    if (i < 0 || i >= rows_) return;
    const int32_t id = dist_->idAt(i);
    emit hoverText(tr("rank %1 \u00b7 \u2018%2\u2019 (id %3) \u00b7 logit %4 \u00b7 p = %5 \u00b7 after the settings %6%7")
                       .arg(i + 1)
                       .arg(vocab_ ? vocab_->displayOf(id) : QString::number(id))
                       .arg(id)
                       .arg(double(dist_->logit(id)), 0, 'f', 3)
                       .arg(formatPercent(dist_->prob(id)))
                       .arg(dist_->survives(id) ? formatPercent(dist_->sampledProb(id)) : tr("removed"))
                       .arg(id == highlight_ ? tr(" \u00b7 the text's actual next token") : QString()));
}

// ---------------------------------------------------------------------------------------------- rank plot

RankPlot::RankPlot(QWidget* parent) : QWidget(parent) { setMouseTracking(true); }

void RankPlot::setData(const LogitsDistribution* d, const VocabularyPtr& vocab, int32_t highlight) {
    dist_ = d;
    vocab_ = vocab;
    highlight_ = highlight;
    minLog_ = -12.0;
    if (d && !d->empty()) {
        const double least = d->prob(d->idAt(d->size() - 1));
        const double floorLog = least > 0 ? std::floor(std::log10(least)) : -30.0;
        minLog_ = std::clamp(floorLog, -30.0, -2.0);
    }
    update();
}

QString RankPlot::summary() const {
    return tr("Probability by rank over all %1 tokens \u00b7 entropy %2 nats \u00b7 perplexity %3")
        .arg(groupDigits(qulonglong(dist_->size())))
        .arg(dist_->entropy(), 0, 'f', 3)
        .arg(formatValue(dist_->perplexity()));
}

QString RankPlot::sampledSummary() const {
    const int64_t S = dist_->survivors();
    return tr("After the settings: %1 %2 survive, holding %3 of the model's probability \u00b7 entropy %4 nats \u00b7 "
              "perplexity %5")
        .arg(groupDigits(qulonglong(S)))
        .arg(S == 1 ? tr("token") : tr("tokens"))
        .arg(formatPercent(dist_->survivingMass()))
        .arg(dist_->sampledEntropy(), 0, 'f', 3)
        .arg(formatValue(dist_->sampledPerplexity()));
}

int RankPlot::textHeight(const QString& text) const {
    return QFontMetrics(font()).boundingRect(QRect(0, 0, width() - 12, 10 * fontMetrics().height()), Qt::TextWordWrap, text).height();
}

QRectF RankPlot::plotRect() const {
    const QFontMetrics fm(font());
    const double left = fm.horizontalAdvance(QStringLiteral("1e-30")) + 12;
    double top = fm.height() * 1.2;
    if (dist_ && !dist_->empty()) top = 4 + textHeight(summary()) + textHeight(sampledSummary()) + fm.height() * 0.6;
    const double right = fm.horizontalAdvance(QStringLiteral("100,000")) / 2.0 + 6;
    return QRectF(left, top, width() - left - right, height() - top - fm.height() * 2.4);
}

double RankPlot::xOf(double rank1) const {
    const QRectF r = plotRect();
    const double maxLog = std::log10(double(std::max<int64_t>(2, dist_->size())));
    return r.left() + r.width() * std::log10(std::max(1.0, rank1)) / maxLog;
}

double RankPlot::yOf(double p) const {
    const QRectF r = plotRect();
    const double lp = p > 0 ? std::max(std::log10(p), minLog_) : minLog_;
    return r.top() + r.height() * (0.0 - lp) / (0.0 - minLog_);
}

void RankPlot::paintEvent(QPaintEvent*) {
    QPainter g(this);
    g.setRenderHint(QPainter::Antialiasing);
    g.fillRect(rect(), palette().base());
    const QFontMetrics fm(font());
    if (!dist_ || dist_->empty()) {
        g.setPen(palette().color(QPalette::PlaceholderText));
        g.drawText(rect(), Qt::AlignCenter, tr("No distribution yet"));
        return;
    }
    const QRectF r = plotRect();
    const int64_t V = dist_->size();
    const int64_t S = dist_->survivors();
    // Summary above the plot.
    const int h1 = textHeight(summary()), h2 = textHeight(sampledSummary());
    g.setPen(palette().color(QPalette::Text));
    g.drawText(QRectF(6, 2, width() - 12, h1), Qt::AlignLeft | Qt::TextWordWrap, summary());
    g.setPen(kSampled.darker(140));
    g.drawText(QRectF(6, 2 + h1, width() - 12, h2), Qt::AlignLeft | Qt::TextWordWrap, sampledSummary());
    // The survivors' ranks, shaded.
    if (S > 0) g.fillRect(QRectF(r.left(), r.top(), std::max(2.0, xOf(double(S)) - r.left()), r.height()), kSurvivorShade);
    // Axes and grid.
    g.setPen(palette().color(QPalette::Mid));
    g.drawRect(r);
    for (int e = 0; e >= int(minLog_); e -= (minLog_ < -16 ? 4 : 2)) {
        const double y = yOf(std::pow(10.0, e));
        g.setPen(QPen(palette().color(QPalette::Midlight), 1, Qt::DotLine));
        g.drawLine(QPointF(r.left(), y), QPointF(r.right(), y));
        g.setPen(palette().color(QPalette::PlaceholderText));
        g.drawText(QRectF(0, y - fm.height() / 2.0, r.left() - 4, fm.height()), Qt::AlignRight | Qt::AlignVCenter,
                   e == 0 ? QStringLiteral("1") : QStringLiteral("1e%1").arg(e));
    }
    for (int64_t rank = 1; rank <= V; rank *= 10) {
        const double x = xOf(double(rank));
        g.setPen(QPen(palette().color(QPalette::Midlight), 1, Qt::DotLine));
        g.drawLine(QPointF(x, r.top()), QPointF(x, r.bottom()));
        g.setPen(palette().color(QPalette::PlaceholderText));
        g.drawText(QRectF(x - 40, r.bottom() + 2, 80, fm.height()), Qt::AlignHCenter, groupDigits(qulonglong(rank)));
    }
    g.drawText(QRectF(r.left(), r.bottom() + fm.height() + 2, r.width(), fm.height()), Qt::AlignHCenter, tr("rank (log scale)"));
    // The model's distribution: probabilities fall with rank, so each pixel column spans [p(last rank), p(first)].
    auto curve = [&](bool sampled, int64_t count) {
        QPainterPath path;
        bool started = false;
        const int cols = int(r.width());
        int64_t next = 0;
        for (int c = 0; c <= cols && next < count; ++c) {
            const double maxLog = std::log10(double(std::max<int64_t>(2, V)));
            const int64_t end = std::min<int64_t>(count, int64_t(std::ceil(std::pow(10.0, maxLog * (c + 1) / cols))));
            if (end <= next) continue;
            const int32_t first = dist_->idAt(next), last = dist_->idAt(end - 1);
            const double pFirst = sampled ? dist_->sampledProb(first) : dist_->prob(first);
            const double pLast = sampled ? dist_->sampledProb(last) : dist_->prob(last);
            const double x = xOf(double(next + 1));
            if (!started) {
                path.moveTo(x, yOf(pFirst));
                started = true;
            } else {
                path.lineTo(x, yOf(pFirst));
            }
            if (end - 1 > next) path.lineTo(xOf(double(end)), yOf(pLast));
            next = end;
        }
        return path;
    };
    g.setBrush(Qt::NoBrush);
    g.setPen(QPen(kModel, 2));
    g.drawPath(curve(false, V));
    if (S > 0) {
        g.setPen(QPen(kSampled, 2));
        g.drawPath(curve(true, S));
        g.setBrush(kSampled);
        // Each survivor as a dot when there are few enough to count.
        if (S <= 50)
            for (int64_t i = 0; i < S; ++i) g.drawEllipse(QPointF(xOf(double(i + 1)), yOf(dist_->sampledProb(dist_->idAt(i)))), 2.5, 2.5);
        g.setBrush(Qt::NoBrush);
    }
    // The text's actual next token.
    if (highlight_ >= 0 && highlight_ < V) {
        const int64_t rank = dist_->rankOf(highlight_);
        const double x = xOf(double(rank + 1));
        g.setPen(QPen(QColor(0xb0, 0x3a, 0x2e), 1.5, Qt::DashLine));
        g.drawLine(QPointF(x, r.top()), QPointF(x, r.bottom()));
        const QString label = tr("\u2018%1\u2019 rank %2, p = %3")
                                  .arg(vocab_ ? vocab_->displayOf(highlight_) : QString::number(highlight_))
                                  .arg(rank + 1)
                                  .arg(formatPercent(dist_->prob(highlight_)));
        const int w = fm.horizontalAdvance(label) + 8;
        const double lx = x + w + 4 < r.right() ? x + 4 : x - w - 4;
        g.fillRect(QRectF(lx, r.top() + 4, w, fm.height() + 2), QColor(255, 255, 255, 220));
        g.setPen(QColor(0xb0, 0x3a, 0x2e));
        g.drawText(QRectF(lx, r.top() + 4, w, fm.height() + 2), Qt::AlignCenter, label);
    }
}

void RankPlot::mouseMoveEvent(QMouseEvent* e) {
    if (!dist_ || dist_->empty()) return;
    const QRectF r = plotRect();
    const double f = (e->position().x() - r.left()) / r.width();
    if (f < 0 || f > 1) return;
    const double maxLog = std::log10(double(std::max<int64_t>(2, dist_->size())));
    const int64_t rank = std::clamp<int64_t>(int64_t(std::pow(10.0, f * maxLog)) - 1, 0, dist_->size() - 1);
    const int32_t id = dist_->idAt(rank);
    emit hoverText(tr("rank %1 \u00b7 \u2018%2\u2019 (id %3) \u00b7 p = %4 \u00b7 cumulative %5 \u00b7 after the settings %6")
                       .arg(rank + 1)
                       .arg(vocab_ ? vocab_->displayOf(id) : QString::number(id))
                       .arg(id)
                       .arg(formatPercent(dist_->prob(id)))
                       .arg(formatPercent(dist_->cumulative(rank)))
                       .arg(dist_->survives(id) ? formatPercent(dist_->sampledProb(id)) : tr("removed")));
}

}  // namespace strata::ui
