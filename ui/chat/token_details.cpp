#include "chat/token_details.hpp"

#include <algorithm>
#include <cmath>

#include <QPainter>
#include <QPainterPath>

#include "logits/token_table_model.hpp"
#include "views/plot_util.hpp"

namespace strata::ui {

namespace {
const QColor kBar(0x1f, 0x5f, 0xa8);
const QColor kChosen(0xe0, 0x8a, 0x00);
const QColor kLine(0x2e, 0x7d, 0x32);
constexpr int kShownTop = 10;
}  // namespace

TokenDetails::TokenDetails(QWidget* parent) : QWidget(parent) { setMinimumHeight(260); }

void TokenDetails::setVocabulary(const VocabularyPtr& vocab) {
    vocab_ = vocab;
    update();
}

void TokenDetails::setToken(const ChatTokenPtr& token) {
    token_ = token;
    update();
}

QString TokenDetails::name(int32_t id) const { return vocab_ ? vocab_->displayOf(id) : QStringLiteral("#%1").arg(id); }

void TokenDetails::paintEvent(QPaintEvent*) {
    QPainter g(this);
    g.setRenderHint(QPainter::Antialiasing);
    g.fillRect(rect(), palette().base());
    const QFontMetrics fm(font());
    if (!token_) {
        g.setPen(palette().color(QPalette::PlaceholderText));
        g.drawText(rect().adjusted(12, 12, -12, -12), Qt::AlignCenter | Qt::TextWordWrap,
                   tr("Point at a generated token to see the step that chose it: the most likely tokens and the "
                      "residual stream's norm after each block. Click it to open that step in the explorer."));
        return;
    }
    const ChatToken& t = *token_;
    QFont bold = font();
    bold.setBold(true);
    g.setFont(bold);
    g.setPen(palette().color(QPalette::Text));
    const int pad = 8;
    int y = pad;
    g.drawText(QRect(pad, y, width() - 2 * pad, fm.height()), Qt::AlignLeft | Qt::AlignVCenter,
               tr("\u2018%1\u2019  id %2  at position %3").arg(name(t.id)).arg(t.id).arg(t.position));
    g.setFont(font());
    y += fm.height() + 2;
    g.setPen(palette().color(QPalette::PlaceholderText));
    const QString sub = tr("chosen with p = %1 (rank %2) at the step of position %3, whose distribution has entropy %4 nats")
                            .arg(formatPercent(t.prob))
                            .arg(groupDigits(qulonglong(t.rank + 1)))
                            .arg(t.position - 1)
                            .arg(t.entropy, 0, 'f', 2);
    const QRect subRect = fm.boundingRect(QRect(pad, y, width() - 2 * pad, 4 * fm.height()), Qt::TextWordWrap, sub);
    g.drawText(QRect(pad, y, width() - 2 * pad, subRect.height()), Qt::AlignLeft | Qt::TextWordWrap, sub);
    y += subRect.height() + 6;
    const int rest = height() - y - pad;
    const int topH = rest * 3 / 5;
    paintTop(g, QRect(pad, y, width() - 2 * pad, topH));
    paintNorms(g, QRect(pad, y + topH + 6, width() - 2 * pad, rest - topH - 6));
}

void TokenDetails::paintTop(QPainter& g, const QRect& r) const {
    const ChatToken& t = *token_;
    const QFontMetrics fm(font());
    const int n = std::min<int>(kShownTop, int(t.top.size()));
    g.setPen(palette().color(QPalette::Text));
    g.drawText(QRect(r.left(), r.top(), r.width(), fm.height()), Qt::AlignLeft, tr("Most likely at that step"));
    if (n == 0) return;
    const int top = r.top() + fm.height() + 2;
    const int rh = std::max(fm.height(), (r.bottom() - top) / n);
    const int textW = std::min(r.width() / 3, fm.horizontalAdvance(QStringLiteral("MMMMMMMMMMMM")));
    int numW = 0;
    for (int i = 0; i < n; ++i) numW = std::max(numW, fm.horizontalAdvance(formatPercent(t.topProb[size_t(i)])));
    numW += 8;
    const int barX = r.left() + textW + 6;
    const int barW = std::max(10, r.right() - barX - numW);
    double maxP = 0;
    for (int i = 0; i < n; ++i) maxP = std::max(maxP, t.topProb[size_t(i)]);
    if (!(maxP > 0)) maxP = 1;
    for (int i = 0; i < n; ++i) {
        const int y = top + i * rh;
        const bool chosen = t.top[size_t(i)].id == t.id;
        g.setPen(chosen ? kChosen : palette().color(QPalette::Text));
        QFont f = font();
        f.setBold(chosen);
        g.setFont(f);
        g.drawText(QRect(r.left(), y, textW, rh), Qt::AlignLeft | Qt::AlignVCenter,
                   fm.elidedText(name(t.top[size_t(i)].id), Qt::ElideRight, textW));
        g.setFont(font());
        const double p = t.topProb[size_t(i)];
        g.fillRect(QRectF(barX, y + rh * 0.2, std::max(1.0, p / maxP * barW), rh * 0.6), chosen ? kChosen : kBar);
        g.setPen(palette().color(QPalette::Text));
        g.drawText(QRect(barX + barW + 4, y, numW, rh), Qt::AlignLeft | Qt::AlignVCenter, formatPercent(p));
    }
}

void TokenDetails::paintNorms(QPainter& g, const QRect& r) const {
    const std::vector<float>& v = token_->residualNorms;
    const QFontMetrics fm(font());
    g.setPen(palette().color(QPalette::Text));
    g.drawText(QRect(r.left(), r.top(), r.width(), fm.height()), Qt::AlignLeft,
               tr("Residual norm \u2016h\u2016 after each block (x\u2080 first)"));
    if (v.size() < 2) return;
    float hi = 0;
    for (float x : v) hi = std::isfinite(x) ? std::max(hi, x) : hi;
    if (!(hi > 0)) return;
    const QRectF plot(r.left() + fm.horizontalAdvance(QStringLiteral("0000")) + 6, r.top() + fm.height() + 4,
                      r.width() - fm.horizontalAdvance(QStringLiteral("0000")) - 10, r.height() - 2 * fm.height() - 8);
    g.setPen(palette().color(QPalette::Mid));
    g.drawLine(plot.bottomLeft(), plot.bottomRight());
    g.drawLine(plot.bottomLeft(), plot.topLeft());
    g.setPen(palette().color(QPalette::PlaceholderText));
    g.drawText(QRectF(r.left(), plot.top() - fm.height() / 2.0, plot.left() - r.left() - 4, fm.height()),
               Qt::AlignRight | Qt::AlignVCenter, formatValue(hi));
    g.drawText(QRectF(r.left(), plot.bottom() - fm.height() / 2.0, plot.left() - r.left() - 4, fm.height()),
               Qt::AlignRight | Qt::AlignVCenter, QStringLiteral("0"));
    const int n = int(v.size());
    auto at = [&](int i) {
        return QPointF(plot.left() + plot.width() * i / std::max(1, n - 1), plot.bottom() - plot.height() * double(v[size_t(i)]) / hi);
    };
    QPainterPath path(at(0));
    for (int i = 1; i < n; ++i) path.lineTo(at(i));
    g.setPen(QPen(kLine, 2));
    g.drawPath(path);
    g.setBrush(kLine);
    for (int i = 0; i < n; ++i) g.drawEllipse(at(i), 2.5, 2.5);
    g.setPen(palette().color(QPalette::PlaceholderText));
    const int step = std::max(1, n / 8);
    for (int i = 0; i < n; i += step)
        g.drawText(QRectF(at(i).x() - 20, plot.bottom() + 2, 40, fm.height()), Qt::AlignHCenter,
                   i == 0 ? QStringLiteral("x\u2080") : QString::number(i - 1));
}

}  // namespace strata::ui
