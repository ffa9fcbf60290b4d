#include "views/vector_plot.hpp"

#include <algorithm>
#include <cmath>

#include <QMouseEvent>
#include <QPainter>
#include <QWheelEvent>

#include "views/plot_util.hpp"

namespace strata::ui {

namespace {
constexpr int kLeft = 56, kRight = 12, kTop = 8, kBottom = 34;
}

VectorPlot::VectorPlot(QWidget* parent) : QWidget(parent) {
    setMouseTracking(true);
    message_ = tr("no data");
}

void VectorPlot::setVector(std::vector<float> values, const QString& indexName, const QString& valueName) {
    const bool same = values.size() == values_.size();
    values_ = std::move(values);
    indexName_ = indexName;
    valueName_ = valueName;
    message_.clear();
    if (!same) {
        start_ = 0;
        end_ = double(values_.size());
    }
    lo_ = INFINITY;
    hi_ = -INFINITY;
    for (float v : values_)
        if (std::isfinite(v)) lo_ = std::min(lo_, v), hi_ = std::max(hi_, v);
    if (reference_) lo_ = std::min(lo_, *reference_), hi_ = std::max(hi_, *reference_);
    if (!(hi_ > lo_)) {
        lo_ = std::isfinite(lo_) ? lo_ - 1 : -1;
        hi_ = lo_ + 2;
    }
    const float pad = (hi_ - lo_) * 0.05f;
    lo_ -= pad;
    hi_ += pad;
    update();
}

void VectorPlot::clear(const QString& message) {
    values_.clear();
    marked_.clear();
    message_ = message;
    update();
}

void VectorPlot::setMarked(std::vector<int64_t> indices) {
    marked_ = std::move(indices);
    update();
}

void VectorPlot::setReferenceLine(std::optional<float> y) {
    reference_ = y;
    update();
}

QRect VectorPlot::plotRect() const { return QRect(kLeft, kTop, std::max(10, width() - kLeft - kRight), std::max(10, height() - kTop - kBottom)); }

std::pair<int64_t, int64_t> VectorPlot::pixelRange(int px, int width) const {
    const double span = end_ - start_;
    const int64_t n = int64_t(values_.size());
    const int64_t a = std::clamp<int64_t>(int64_t(std::floor(start_ + span * px / width)), 0, std::max<int64_t>(0, n - 1));
    const int64_t b = std::clamp<int64_t>(int64_t(std::ceil(start_ + span * (px + 1) / width)), a + 1, n);
    return {a, b};
}

double VectorPlot::yOf(float v, const QRect& p) const { return p.bottom() - (double(v) - lo_) / (double(hi_) - lo_) * p.height(); }

void VectorPlot::paintEvent(QPaintEvent*) {
    QPainter g(this);
    g.fillRect(rect(), palette().base());
    const QFontMetrics fm(font());
    if (values_.empty()) {
        g.setPen(palette().color(QPalette::PlaceholderText));
        g.drawText(rect(), Qt::AlignCenter, message_);
        return;
    }
    const QRect p = plotRect();
    g.setPen(palette().color(QPalette::Mid));
    g.drawRect(p.adjusted(0, 0, -1, -1));

    // Value axis.
    g.setPen(palette().color(QPalette::Text));
    for (double t : niceTicks(lo_, hi_, std::max(2, p.height() / 40))) {
        const double y = yOf(float(t), p);
        g.setPen(faintText(palette(), 30));
        g.drawLine(QPointF(p.left(), y), QPointF(p.right(), y));
        g.setPen(palette().color(QPalette::Text));
        g.drawText(QRectF(0, y - fm.height() / 2.0, kLeft - 6, fm.height()), Qt::AlignRight | Qt::AlignVCenter, formatValue(t));
    }
    if (reference_) {
        g.setPen(QPen(QColor(0x88, 0x88, 0x88), 1, Qt::DashLine));
        const double y = yOf(*reference_, p);
        g.drawLine(QPointF(p.left(), y), QPointF(p.right(), y));
    }

    // Bars from the baseline (the reference line, else 0): each pixel column spans the baseline and the min and
    // max of the elements it covers, so it reads as a bar chart when zoomed in and as an envelope when not.
    const QColor ink(0x1f, 0x5f, 0xa8);
    const float base = reference_ ? *reference_ : std::clamp(0.0f, lo_, hi_);
    g.setPen(ink);
    for (int px = 0; px < p.width(); ++px) {
        const auto [a, b] = pixelRange(px, p.width());
        float mn = base, mx = base;
        for (int64_t i = a; i < b; ++i) mn = std::min(mn, values_[size_t(i)]), mx = std::max(mx, values_[size_t(i)]);
        g.drawLine(QPointF(p.left() + px + 0.5, yOf(mn, p)), QPointF(p.left() + px + 0.5, yOf(mx, p)));
    }

    // Marked indices (outliers), labelled.
    g.setRenderHint(QPainter::Antialiasing);
    const double span = end_ - start_;
    for (int64_t i : marked_) {
        if (i < int64_t(std::floor(start_)) || i >= int64_t(std::ceil(end_)) || i >= int64_t(values_.size())) continue;
        const double x = p.left() + (double(i) + 0.5 - start_) / span * p.width();
        const double y = yOf(values_[size_t(i)], p);
        g.setPen(Qt::NoPen);
        g.setBrush(QColor(0xc0, 0x39, 0x2b));
        g.drawEllipse(QPointF(x, y), 3.5, 3.5);
        g.setPen(QColor(0xc0, 0x39, 0x2b));
        const double ty = y < p.top() + fm.height() + 4 ? y + fm.height() + 2 : y - 5;
        g.drawText(QPointF(x + 5, ty), QString::number(i));
    }
    g.setRenderHint(QPainter::Antialiasing, false);

    // Index axis.
    g.setPen(palette().color(QPalette::Text));
    for (double t : niceTicks(start_, end_, std::max(2, p.width() / 90))) {
        const double x = p.left() + (t - start_) / span * p.width();
        if (x < p.left() - 1 || x > p.right() + 1) continue;
        g.drawLine(QPointF(x, p.bottom()), QPointF(x, p.bottom() + 4));
        g.drawText(QRectF(x - 40, p.bottom() + 5, 80, fm.height()), Qt::AlignHCenter, QString::number(qint64(t)));
    }
    g.drawText(QRect(p.left(), height() - fm.height() - 1, p.width(), fm.height()), Qt::AlignHCenter,
               tr("%1 (%2 of %3 shown%4)")
                   .arg(indexName_)
                   .arg(qint64(std::llround(span)))
                   .arg(values_.size())
                   .arg(span > p.width() ? tr("; each pixel: min..max") : QString()));

    if (hoverPx_ >= 0 && hoverPx_ < p.width()) {
        g.setPen(QPen(faintText(palette(), 90), 1, Qt::DotLine));
        g.drawLine(p.left() + hoverPx_, p.top(), p.left() + hoverPx_, p.bottom());
    }
}

void VectorPlot::mouseMoveEvent(QMouseEvent* e) {
    const QPoint pos = e->position().toPoint();
    const QRect p = plotRect();
    if (e->buttons() & Qt::LeftButton) {
        const double span = end_ - start_;
        start_ -= (pos.x() - lastPos_.x()) * span / p.width();
        start_ = std::clamp(start_, 0.0, double(values_.size()) - span);
        end_ = start_ + span;
        lastPos_ = pos;
    }
    hoverPx_ = p.contains(pos) && !values_.empty() ? pos.x() - p.left() : -1;
    if (hoverPx_ >= 0) {
        const auto [a, b] = pixelRange(hoverPx_, p.width());
        int64_t best = a;
        for (int64_t i = a; i < b; ++i)
            if (std::fabs(values_[size_t(i)] - (reference_ ? *reference_ : 0.0f)) >
                std::fabs(values_[size_t(best)] - (reference_ ? *reference_ : 0.0f)))
                best = i;
        QString s = tr("%1 %2 \u00b7 %3 %4").arg(indexName_).arg(best).arg(valueName_, formatValue(values_[size_t(best)]));
        if (b - a > 1) s += tr("  (most extreme of %1s %2\u2013%3)").arg(indexName_).arg(a).arg(b - 1);
        emit hoverChanged(s);
    } else {
        emit hoverChanged(QString());
    }
    update();
}

void VectorPlot::mousePressEvent(QMouseEvent* e) { lastPos_ = e->position().toPoint(); }

void VectorPlot::mouseDoubleClickEvent(QMouseEvent*) {
    start_ = 0;
    end_ = double(values_.size());
    update();
}

void VectorPlot::wheelEvent(QWheelEvent* e) {
    const double steps = e->angleDelta().y() / 120.0;
    if (steps == 0 || values_.empty()) return;
    const QRect p = plotRect();
    const double n = double(values_.size());
    const double span = end_ - start_;
    const double visible = std::clamp(span / std::pow(1.25, steps), std::min(8.0, n), n);
    const double f = std::clamp((e->position().x() - p.left()) / double(p.width()), 0.0, 1.0);
    const double anchor = start_ + f * span;
    start_ = std::clamp(anchor - f * visible, 0.0, n - visible);
    end_ = start_ + visible;
    update();
    e->accept();
}

void VectorPlot::leaveEvent(QEvent*) {
    hoverPx_ = -1;
    update();
}

}  // namespace strata::ui
