#include "views/heatmap_widget.hpp"

#include <algorithm>
#include <cmath>

#include <QFontMetrics>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QWheelEvent>

#include "views/plot_util.hpp"
#include "worker/analysis.hpp"

namespace strata::ui {

namespace {
constexpr int kTopMargin = 8;
constexpr int kRightMargin = 78;   // colour legend
constexpr double kMinVisibleCols = 8.0;
}  // namespace

HeatmapWidget::HeatmapWidget(QWidget* parent) : QWidget(parent) {
    setMouseTracking(true);
    setFocusPolicy(Qt::StrongFocus);
    setAttribute(Qt::WA_OpaquePaintEvent);
    message_ = tr("no data");
}

void HeatmapWidget::setMatrix(std::vector<float> data, int64_t rows, int64_t cols, int64_t rowStep, int64_t colStep) {
    const bool sameShape = rows == rows_ && cols == cols_ && rowStep == rowStep_ && colStep == colStep_;
    data_ = std::move(data);
    rows_ = rows;
    cols_ = cols;
    rowStep_ = std::max<int64_t>(1, rowStep);
    colStep_ = std::max<int64_t>(1, colStep);
    message_.clear();
    // Stepping through layers keeps the zoom: the same features stay in view.
    if (!sameShape) resetZoom();
    updateRange();
    dirty_ = true;
    hover_ = Probe{};
    update();
}

void HeatmapWidget::clear(const QString& message) {
    data_.clear();
    rows_ = cols_ = 0;
    message_ = message;
    hover_ = Probe{};
    dirty_ = true;
    update();
}

void HeatmapWidget::setScaleKind(ColorScale::Kind kind) {
    scale_.kind = kind;
    updateRange();
    dirty_ = true;
    update();
}

void HeatmapWidget::setFixedRange(float lo, float hi) {
    fixedRange_ = true;
    scale_.lo = lo;
    scale_.hi = hi;
    dirty_ = true;
    update();
}

void HeatmapWidget::setAutoRange() {
    fixedRange_ = false;
    updateRange();
    dirty_ = true;
    update();
}

void HeatmapWidget::setAxisNames(const QString& rowName, const QString& colName) {
    rowName_ = rowName;
    colName_ = colName;
    update();
}

void HeatmapWidget::setRowLabels(const QStringList& labels) {
    rowLabels_ = labels;
    update();
}

void HeatmapWidget::setColumnLabels(const QStringList& labels) {
    colLabels_ = labels;
    dirty_ = true;
    update();
}

void HeatmapWidget::setSelectedRow(int row) {
    selectedRow_ = row;
    update();
}

void HeatmapWidget::resetZoom() {
    colStart_ = 0;
    colEnd_ = double(cols_);
    rowStart_ = 0;
    rowEnd_ = rows_;
    dirty_ = true;
    update();
}

void HeatmapWidget::zoomColumns(double factor, double anchor) {
    if (cols_ == 0 || factor <= 0) return;
    const double visible = std::clamp((colEnd_ - colStart_) / factor, std::min(kMinVisibleCols, double(cols_)), double(cols_));
    const double f = (anchor - colStart_) / std::max(1e-9, colEnd_ - colStart_);
    colStart_ = anchor - f * visible;
    colEnd_ = colStart_ + visible;
    clampView();
    dirty_ = true;
    update();
}

void HeatmapWidget::clampView() {
    const double visible = colEnd_ - colStart_;
    if (colStart_ < 0) {
        colStart_ = 0;
        colEnd_ = visible;
    }
    if (colEnd_ > double(cols_)) {
        colEnd_ = double(cols_);
        colStart_ = std::max(0.0, colEnd_ - visible);
    }
    const int64_t vr = std::clamp<int64_t>(rowEnd_ - rowStart_, std::min<int64_t>(1, rows_), rows_);
    rowStart_ = std::clamp<int64_t>(rowStart_, 0, rows_ - vr);
    rowEnd_ = rowStart_ + vr;
}

void HeatmapWidget::updateRange() {
    if (fixedRange_ || data_.empty()) return;
    if (scale_.kind == ColorScale::Kind::Diverging) {
        // Symmetric and robust: the 99th percentile of |x|, so that a few huge outliers do not wash out the rest.
        float r = analysis::abs_quantile(data_, 0.99);
        if (!(r > 0)) r = analysis::abs_quantile(data_, 1.0);
        if (!(r > 0)) r = 1.0f;
        scale_.lo = -r;
        scale_.hi = r;
    } else {
        float lo = INFINITY, hi = -INFINITY;
        for (float v : data_)
            if (std::isfinite(v)) {
                lo = std::min(lo, v);
                hi = std::max(hi, v);
            }
        if (!(hi > lo)) {
            lo = std::isfinite(lo) ? lo : 0.0f;
            hi = lo + 1.0f;
        }
        scale_.lo = lo;
        scale_.hi = hi;
    }
}

int HeatmapWidget::leftMargin() const {
    const QFontMetrics fm(font());
    int w = fm.horizontalAdvance(QStringLiteral("0000"));
    for (const QString& l : rowLabels_) w = std::max(w, fm.horizontalAdvance(l));
    return std::min(170, w + 14);
}

int HeatmapWidget::bottomMargin() const {
    const QFontMetrics fm(font());
    if (!colLabels_.isEmpty()) {
        int w = 0;
        for (const QString& l : colLabels_) w = std::max(w, fm.horizontalAdvance(l));
        return std::min(110, w + 10) + fm.height();
    }
    return 2 * fm.height() + 8;
}

QRect HeatmapWidget::plotRect() const {
    const int l = leftMargin();
    return QRect(l, kTopMargin, std::max(10, width() - l - kRightMargin), std::max(10, height() - kTopMargin - bottomMargin()));
}

std::pair<int64_t, int64_t> HeatmapWidget::pixelColumns(int px, int width) const {
    const double span = colEnd_ - colStart_;
    const double a = colStart_ + span * px / width;
    const double b = colStart_ + span * (px + 1) / width;
    const int64_t first = std::clamp<int64_t>(int64_t(std::floor(a)), 0, std::max<int64_t>(0, cols_ - 1));
    const int64_t last = std::clamp<int64_t>(int64_t(std::ceil(b)), first + 1, cols_);
    return {first, last};
}

std::pair<int64_t, int64_t> HeatmapWidget::pixelRows(int py, int height) const {
    const int64_t n = rowEnd_ - rowStart_;
    const int64_t first = rowStart_ + n * py / height;
    const int64_t last = std::max(first + 1, rowStart_ + n * (py + 1) / height);
    return {std::min(first, rows_ - 1), std::min(last, rows_)};
}

void HeatmapWidget::rebuildImage() {
    dirty_ = false;
    const QRect p = plotRect();
    if (rows_ == 0 || cols_ == 0) {
        image_ = QImage();
        return;
    }
    // One image pixel per device pixel: at a device pixel ratio of 2, twice the buckets in each direction, so the
    // map stays sharp on high-DPI screens.
    const qreal dpr = std::max<qreal>(1.0, devicePixelRatioF());
    const int w = std::max(1, int(std::lround(p.width() * dpr)));
    const int h = int(std::min<int64_t>(rowEnd_ - rowStart_, std::lround(p.height() * dpr)));
    image_ = QImage(w, h, QImage::Format_RGB32);
    image_.setDevicePixelRatio(dpr);
    for (int py = 0; py < h; ++py) {
        const auto [r0, r1] = pixelRows(py, h);
        QRgb* line = reinterpret_cast<QRgb*>(image_.scanLine(py));
        for (int px = 0; px < w; ++px) {
            const auto [c0, c1] = pixelColumns(px, w);
            float best = 0.0f;
            bool nan = false;
            for (int64_t r = r0; r < r1; ++r) {
                const float* row = data_.data() + r * cols_;
                for (int64_t c = c0; c < c1; ++c) {
                    if (std::isnan(row[c])) nan = true;
                    else if (std::fabs(row[c]) > std::fabs(best)) best = row[c];
                }
            }
            if (scale_.kind == ColorScale::Kind::Sequential && r1 - r0 == 1 && c1 - c0 == 1) best = data_[size_t(r0 * cols_ + c0)];
            line[px] = nan ? qRgb(255, 0, 255) : scale_.map(best);
        }
    }
}

HeatmapWidget::Probe HeatmapWidget::probe(QPoint pt) const {
    Probe pr;
    const QRect p = plotRect();
    if (rows_ == 0 || cols_ == 0 || !p.contains(pt)) return pr;
    const int h = int(std::min<int64_t>(rowEnd_ - rowStart_, p.height()));
    const int py = std::clamp(int((pt.y() - p.top()) * double(h) / p.height()), 0, h - 1);
    const int px = std::clamp(pt.x() - p.left(), 0, p.width() - 1);
    const auto [r0, r1] = pixelRows(py, h);
    const auto [c0, c1] = pixelColumns(px, p.width());
    pr.valid = true;
    pr.row = r0;
    pr.col = c0;
    pr.value = data_[size_t(r0 * cols_ + c0)];
    for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) {
            const float v = data_[size_t(r * cols_ + c)];
            if (std::fabs(v) > std::fabs(pr.value)) {
                pr.value = v;
                pr.row = r;
                pr.col = c;
            }
        }
    pr.rowFirst = r0 * rowStep_;
    pr.rowLast = r1 * rowStep_ - 1;
    pr.colFirst = c0 * colStep_;
    pr.colLast = c1 * colStep_ - 1;
    pr.row *= rowStep_;
    pr.col *= colStep_;
    return pr;
}

QString HeatmapWidget::describe(const Probe& p) const {
    if (!p.valid) return {};
    QString row = QStringLiteral("%1 %2").arg(rowName_).arg(p.row);
    if (rowStep_ == 1 && p.row < rowLabels_.size()) row += QStringLiteral(" \u2018%1\u2019").arg(rowLabels_[int(p.row)]);
    QString col = QStringLiteral("%1 %2").arg(colName_).arg(p.col);
    if (colStep_ == 1 && p.col < colLabels_.size()) col += QStringLiteral(" \u2018%1\u2019").arg(colLabels_[int(p.col)]);
    QString s = QStringLiteral("%1 \u00b7 %2 \u00b7 value %3").arg(row, col, formatValue(p.value));
    const bool bucket = p.colLast > p.colFirst || p.rowLast > p.rowFirst;
    if (bucket) {
        s += tr("  (largest |x| of %1 %2\u2013%3").arg(colName_ + "s").arg(p.colFirst).arg(p.colLast);
        if (p.rowLast > p.rowFirst) s += tr(", %1 %2\u2013%3").arg(rowName_ + "s").arg(p.rowFirst).arg(p.rowLast);
        s += ")";
    }
    return s;
}

void HeatmapWidget::resizeEvent(QResizeEvent*) { dirty_ = true; }

void HeatmapWidget::paintEvent(QPaintEvent*) {
    QPainter g(this);
    g.fillRect(rect(), palette().base());
    const QRect p = plotRect();
    const QFontMetrics fm(font());
    if (rows_ == 0 || cols_ == 0) {
        g.setPen(palette().color(QPalette::PlaceholderText));
        g.drawText(rect(), Qt::AlignCenter, message_);
        return;
    }
    if (dirty_ || image_.isNull() || image_.devicePixelRatio() != std::max<qreal>(1.0, devicePixelRatioF())) rebuildImage();
    g.drawImage(p, image_);  // nearest-neighbour scaling: each row is a crisp band
    g.setPen(palette().color(QPalette::Mid));
    g.drawRect(p.adjusted(0, 0, -1, -1));

    const int64_t nr = rowEnd_ - rowStart_;
    const double rowH = double(p.height()) / double(nr);
    auto rowY = [&](int64_t r) { return p.top() + (double(r - rowStart_) + 0.5) * rowH; };

    // Row labels (tokens), thinned out when rows are shorter than the text.
    g.setPen(palette().color(QPalette::Text));
    const int64_t every = std::max<int64_t>(1, int64_t(std::ceil(fm.height() / std::max(1e-9, rowH))));
    for (int64_t r = rowStart_; r < rowEnd_; ++r) {
        if ((r - rowStart_) % every != 0 && r != selectedRow_) continue;
        const QString label = (rowStep_ == 1 && r < rowLabels_.size()) ? rowLabels_[int(r)] : QString::number(r * rowStep_);
        const QString text = fm.elidedText(label, Qt::ElideRight, p.left() - 8);
        g.drawText(QRectF(0, rowY(r) - fm.height() / 2.0, p.left() - 6, fm.height()), Qt::AlignRight | Qt::AlignVCenter, text);
    }
    // Selected row: an outline across the plot.
    if (selectedRow_ >= rowStart_ && selectedRow_ < rowEnd_ && rowStep_ == 1) {
        g.setPen(QPen(palette().color(QPalette::Highlight), 2));
        g.setBrush(Qt::NoBrush);
        g.drawRect(QRectF(p.left() + 1, rowY(selectedRow_) - rowH / 2.0, p.width() - 2, rowH));
    }

    // Column axis: labels when given and wide enough, else index ticks.
    const double colW = p.width() / std::max(1e-9, colEnd_ - colStart_);
    g.setPen(palette().color(QPalette::Text));
    if (!colLabels_.isEmpty() && colW >= fm.height() * 0.9) {
        for (int64_t c = int64_t(std::floor(colStart_)); c < std::min<int64_t>(cols_, int64_t(std::ceil(colEnd_))); ++c) {
            if (c >= colLabels_.size()) break;
            const double x = p.left() + (double(c) + 0.5 - colStart_) * colW;
            g.save();
            g.translate(x + fm.ascent() / 2.0 - 2, p.bottom() + 4);
            g.rotate(90);
            g.drawText(0, 0, fm.elidedText(colLabels_[int(c)], Qt::ElideRight, bottomMargin() - fm.height() - 6));
            g.restore();
        }
    } else {
        for (double t : niceTicks(colStart_ * colStep_, colEnd_ * colStep_, std::max(2, p.width() / 90))) {
            const double x = p.left() + (t / colStep_ - colStart_) * colW;
            if (x < p.left() - 1 || x > p.right() + 1) continue;
            g.drawLine(QPointF(x, p.bottom()), QPointF(x, p.bottom() + 4));
            const QString s = QString::number(qint64(t));
            g.drawText(QRectF(x - 40, p.bottom() + 5, 80, fm.height()), Qt::AlignHCenter | Qt::AlignTop, s);
        }
    }
    const QString axis = tr("%1 (%2 of %3 shown%4)")
                             .arg(colName_)
                             .arg(qint64(std::llround((colEnd_ - colStart_) * colStep_)))
                             .arg(cols_ * colStep_)
                             .arg(colW < 1.0 ? tr("; each pixel: largest |x|") : QString());
    g.drawText(QRect(p.left(), height() - fm.height() - 2, p.width(), fm.height()), Qt::AlignHCenter, axis);

    // Colour legend.
    const QRect bar(p.right() + 14, p.top(), 12, p.height());
    g.drawImage(bar, scale_.legend(bar.width(), bar.height(), true));
    g.setPen(palette().color(QPalette::Mid));
    g.drawRect(bar.adjusted(0, 0, -1, -1));
    g.setPen(palette().color(QPalette::Text));
    auto legendText = [&](float v, int y) {
        g.drawText(QRect(bar.right() + 4, y - fm.height() / 2, kRightMargin - 30, fm.height()), Qt::AlignLeft | Qt::AlignVCenter, formatValue(v));
    };
    legendText(scale_.hi, bar.top() + fm.height() / 2);
    legendText(scale_.lo, bar.bottom() - fm.height() / 2);
    if (scale_.kind == ColorScale::Kind::Diverging) legendText(0.0f, bar.center().y());

    // Hovered bucket.
    if (hover_.valid) {
        const double x0 = p.left() + (double(hover_.colFirst) / colStep_ - colStart_) * colW;
        const double x1 = p.left() + (double(hover_.colLast + 1) / colStep_ - colStart_) * colW;
        const double y0 = p.top() + (double(hover_.rowFirst) / rowStep_ - rowStart_) * rowH;
        const double y1 = p.top() + (double(hover_.rowLast + 1) / rowStep_ - rowStart_) * rowH;
        g.setPen(QPen(Qt::black, 1));
        g.setBrush(Qt::NoBrush);
        g.drawRect(QRectF(x0, y0, std::max(2.0, x1 - x0), std::max(2.0, y1 - y0)));
    }
}

void HeatmapWidget::mouseMoveEvent(QMouseEvent* e) {
    const QPoint pos = e->position().toPoint();
    if (dragging_ || ((e->buttons() & Qt::LeftButton) && (pos - pressPos_).manhattanLength() > 4)) {
        dragging_ = true;
        const QRect p = plotRect();
        const double dx = pos.x() - lastPos_.x();
        const double span = colEnd_ - colStart_;
        colStart_ -= dx * span / p.width();
        colEnd_ = colStart_ + span;
        rowPanRemainder_ -= double(pos.y() - lastPos_.y()) * double(rowEnd_ - rowStart_) / p.height();
        const int64_t dr = int64_t(rowPanRemainder_);
        rowPanRemainder_ -= double(dr);
        rowStart_ += dr;
        rowEnd_ += dr;
        clampView();
        dirty_ = true;
        lastPos_ = pos;
    }
    hover_ = probe(pos);
    emit hoverChanged(describe(hover_));
    update();
}

void HeatmapWidget::mousePressEvent(QMouseEvent* e) {
    pressPos_ = lastPos_ = e->position().toPoint();
    dragging_ = false;
    rowPanRemainder_ = 0;
    setFocus();
}

void HeatmapWidget::mouseReleaseEvent(QMouseEvent* e) {
    if (!dragging_ && e->button() == Qt::LeftButton) {
        const Probe p = probe(e->position().toPoint());
        if (p.valid && rowStep_ == 1) emit rowClicked(int(p.row));
    }
    dragging_ = false;
}

void HeatmapWidget::mouseDoubleClickEvent(QMouseEvent*) { resetZoom(); }

void HeatmapWidget::wheelEvent(QWheelEvent* e) {
    const double steps = e->angleDelta().y() / 120.0;
    if (steps == 0 || cols_ == 0) return;
    const QRect p = plotRect();
    const double factor = std::pow(1.25, steps);
    if (e->modifiers() & Qt::ControlModifier) {
        const int64_t n = rowEnd_ - rowStart_;
        const int64_t visible = std::clamp<int64_t>(int64_t(std::llround(n / factor)), 1, rows_);
        const double f = std::clamp((e->position().y() - p.top()) / double(p.height()), 0.0, 1.0);
        const int64_t anchor = rowStart_ + int64_t(f * n);
        rowStart_ = anchor - int64_t(f * visible);
        rowEnd_ = rowStart_ + visible;
        clampView();
        dirty_ = true;
        update();
    } else {
        const double f = std::clamp((e->position().x() - p.left()) / double(p.width()), 0.0, 1.0);
        zoomColumns(factor, colStart_ + f * (colEnd_ - colStart_));
    }
    e->accept();
}

void HeatmapWidget::keyPressEvent(QKeyEvent* e) {
    const double mid = (colStart_ + colEnd_) / 2.0;
    switch (e->key()) {
        case Qt::Key_Plus:
        case Qt::Key_Equal: zoomColumns(2.0, mid); break;
        case Qt::Key_Minus: zoomColumns(0.5, mid); break;
        case Qt::Key_0: resetZoom(); break;
        default: QWidget::keyPressEvent(e);
    }
}

void HeatmapWidget::leaveEvent(QEvent*) {
    hover_ = Probe{};
    update();
}

}  // namespace strata::ui
