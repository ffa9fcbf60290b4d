#include "logits/lens_plot.hpp"

#include <algorithm>
#include <cmath>

#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>

#include "logits/token_table_model.hpp"
#include "views/plot_util.hpp"

namespace strata::ui {

namespace {
const QColor kProb(0x1f, 0x5f, 0xa8);
const QColor kRank(0xe0, 0x8a, 0x00);
}  // namespace

LensPlot::LensPlot(QWidget* parent) : QWidget(parent) { setMouseTracking(true); }

void LensPlot::setTrack(const QString& token, std::vector<double> prob, std::vector<int64_t> rank, int64_t vocab) {
    token_ = token;
    prob_ = std::move(prob);
    rank_ = std::move(rank);
    vocab_ = std::max<int64_t>(2, vocab);
    double least = 1.0;
    for (double p : prob_)
        if (p > 0) least = std::min(least, p);
    minLog_ = std::clamp(std::floor(std::log10(least)) - 1.0, -30.0, -2.0);
    update();
}

QString LensPlot::rowName(int row) const { return row == 0 ? QStringLiteral("x\u2080") : QStringLiteral("h.%1").arg(row - 1); }

QRectF LensPlot::plotRect() const {
    const QFontMetrics fm(font());
    const double side = fm.horizontalAdvance(QStringLiteral("100,000")) + 12;
    return QRectF(side, fm.height() * 2.2, width() - 2 * side, height() - fm.height() * 4.4);
}

double LensPlot::xOf(int row) const {
    const QRectF r = plotRect();
    const int n = int(prob_.size());
    return n <= 1 ? r.center().x() : r.left() + r.width() * row / (n - 1);
}

void LensPlot::paintEvent(QPaintEvent*) {
    QPainter g(this);
    g.setRenderHint(QPainter::Antialiasing);
    g.fillRect(rect(), palette().base());
    const QFontMetrics fm(font());
    if (prob_.empty()) {
        g.setPen(palette().color(QPalette::PlaceholderText));
        g.drawText(rect(), Qt::AlignCenter, tr("Compute the logit lens to follow a token through the layers"));
        return;
    }
    const QRectF r = plotRect();
    g.setPen(palette().color(QPalette::Text));
    g.drawText(QRectF(6, 2, width() - 12, fm.height()), Qt::AlignLeft | Qt::AlignVCenter,
               tr("\u2018%1\u2019 through the layers: its probability and its rank if the model stopped there").arg(token_));
    g.setPen(palette().color(QPalette::Mid));
    g.drawRect(r);
    auto yProb = [&](double p) {
        const double lp = p > 0 ? std::max(std::log10(p), minLog_) : minLog_;
        return r.top() + r.height() * (0.0 - lp) / (0.0 - minLog_);
    };
    const double maxRankLog = std::log10(double(vocab_));
    auto yRank = [&](int64_t rank) { return r.top() + r.height() * std::log10(double(rank + 1)) / maxRankLog; };
    // Left axis: probability.
    for (int e = 0; e >= int(minLog_); e -= (minLog_ < -12 ? 4 : 2)) {
        const double y = yProb(std::pow(10.0, e));
        g.setPen(QPen(palette().color(QPalette::Midlight), 1, Qt::DotLine));
        g.drawLine(QPointF(r.left(), y), QPointF(r.right(), y));
        g.setPen(kProb);
        g.drawText(QRectF(0, y - fm.height() / 2.0, r.left() - 4, fm.height()), Qt::AlignRight | Qt::AlignVCenter,
                   e == 0 ? QStringLiteral("1") : QStringLiteral("1e%1").arg(e));
    }
    // Right axis: rank.
    g.setPen(kRank);
    for (int64_t rank = 1; rank <= vocab_; rank *= 10)
        g.drawText(QRectF(r.right() + 4, yRank(rank - 1) - fm.height() / 2.0, width() - r.right() - 4, fm.height()),
                   Qt::AlignLeft | Qt::AlignVCenter, groupDigits(qulonglong(rank)));
    // Bottom axis: the layers.
    g.setPen(palette().color(QPalette::PlaceholderText));
    const int n = int(prob_.size());
    const int step = std::max(1, n / 16);
    for (int i = 0; i < n; i += step)
        g.drawText(QRectF(xOf(i) - 24, r.bottom() + 2, 48, fm.height()), Qt::AlignHCenter, rowName(i));
    g.drawText(QRectF(r.left(), r.bottom() + fm.height() + 2, r.width(), fm.height()), Qt::AlignHCenter,
               tr("residual after the embedding (x\u2080) and after each block"));
    // The two lines.
    QPainterPath prob, rank;
    for (int i = 0; i < n; ++i) {
        const QPointF pp(xOf(i), yProb(prob_[size_t(i)]));
        const QPointF pr(xOf(i), yRank(rank_[size_t(i)]));
        if (i == 0) {
            prob.moveTo(pp);
            rank.moveTo(pr);
        } else {
            prob.lineTo(pp);
            rank.lineTo(pr);
        }
    }
    g.setBrush(Qt::NoBrush);
    g.setPen(QPen(kProb, 2));
    g.drawPath(prob);
    g.setPen(QPen(kRank, 2, Qt::DashLine));
    g.drawPath(rank);
    for (int i = 0; i < n; ++i) {
        g.setPen(Qt::NoPen);
        g.setBrush(kProb);
        g.drawEllipse(QPointF(xOf(i), yProb(prob_[size_t(i)])), 3, 3);
        g.setBrush(kRank);
        g.drawEllipse(QPointF(xOf(i), yRank(rank_[size_t(i)])), 3, 3);
    }
    // Legend.
    const QString lp = tr("probability (left)"), lr = tr("rank (right, 1 at the top)");
    double x = r.right() - fm.horizontalAdvance(lp) - fm.horizontalAdvance(lr) - 60;
    const double y = fm.height() * 1.1;
    g.setPen(QPen(kProb, 2));
    g.drawLine(QPointF(x, y + fm.height() / 2.0), QPointF(x + 16, y + fm.height() / 2.0));
    g.setPen(palette().color(QPalette::Text));
    g.drawText(QRectF(x + 20, y, fm.horizontalAdvance(lp) + 4, fm.height()), Qt::AlignVCenter, lp);
    x += fm.horizontalAdvance(lp) + 34;
    g.setPen(QPen(kRank, 2, Qt::DashLine));
    g.drawLine(QPointF(x, y + fm.height() / 2.0), QPointF(x + 16, y + fm.height() / 2.0));
    g.setPen(palette().color(QPalette::Text));
    g.drawText(QRectF(x + 20, y, fm.horizontalAdvance(lr) + 4, fm.height()), Qt::AlignVCenter, lr);
}

void LensPlot::mouseMoveEvent(QMouseEvent* e) {
    if (prob_.empty()) return;
    const QRectF r = plotRect();
    const int n = int(prob_.size());
    const int i = n <= 1 ? 0 : std::clamp(int(std::lround((e->position().x() - r.left()) / r.width() * (n - 1))), 0, n - 1);
    emit hoverText(tr("%1: \u2018%2\u2019 rank %3 of %4, p = %5")
                       .arg(rowName(i), token_)
                       .arg(rank_[size_t(i)] + 1)
                       .arg(groupDigits(qulonglong(vocab_)))
                       .arg(formatPercent(prob_[size_t(i)])));
}

}  // namespace strata::ui
