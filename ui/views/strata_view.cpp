#include "views/strata_view.hpp"

#include <algorithm>
#include <cmath>

#include <QComboBox>
#include <QMouseEvent>
#include <QPainter>

#include "views/colormap.hpp"
#include "views/plot_util.hpp"

namespace strata::ui {

namespace {
constexpr int kLeft = 64, kTop = 8, kRight = 80;

float rowNorm(const float* x, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += double(x[i]) * x[i];
    return float(std::sqrt(s));
}
}  // namespace

StrataView::StrataView(ExplorerState* state, EngineClient* client, QWidget* parent)
    : ViewPage(tr("Strata: the residual stream"), state, client, parent) {
    setTabName(tr("Strata"));
    colour_ = new QComboBox;
    colour_->addItem(tr("colour: residual norm \u2016x\u2016"));
    colour_->addItem(tr("colour: logit-lens probability"));
    controls()->addStretch(1);
    controls()->addWidget(colour_);
    grid_ = new StrataGrid;
    setCanvas(grid_);
    setReadout(tr("Each cell: one layer's residual at one position. Click to select, double-click to open it as a heatmap."));

    connect(colour_, &QComboBox::currentIndexChanged, this, [this](int i) {
        grid_->setColour(i == 0 ? StrataGrid::Colour::Norm : StrataGrid::Colour::LensProbability);
    });
    connect(grid_, &StrataGrid::hoverChanged, this, [this](const QString& s) {
        if (!s.isEmpty()) setReadout(s);
    });
    connect(grid_, &StrataGrid::cellClicked, this, [this](int row, int pos) {
        state_->setPosition(pos);
        if (row == 0)
            emit partRequested(QStringLiteral("tok_embeddings"), -1);
        else
            emit partRequested(QStringLiteral("block"), row - 1);
    });
    connect(grid_, &StrataGrid::cellDoubleClicked, this, [this](int, int) { emit openTensorRequested(); });
    connect(state_, &ExplorerState::runChanged, this, &StrataView::refresh);
    connect(state_, &ExplorerState::lensChanged, this, &StrataView::refresh);
    auto select = [this] {
        const bool embedding = state_->part().key == QLatin1String("tok_embeddings");
        grid_->setSelection(embedding ? 0 : state_->layer() + 1, state_->position());
    };
    connect(state_, &ExplorerState::layerChanged, this, select);
    connect(state_, &ExplorerState::positionChanged, this, select);
    connect(state_, &ExplorerState::partChanged, this, select);
}

void StrataView::refresh() {
    const RunResultPtr& run = state_->run();
    if (!run) {
        grid_->setData({}, 0, 0, {}, {});
        return;
    }
    const int L = state_->layers(), T = int(run->tokens.size());
    std::vector<float> norms(size_t((L + 1) * T), 0.0f);
    QStringList names;
    for (int r = 0; r <= L; ++r) {
        const QString name = r == 0 ? QStringLiteral("x0") : QStringLiteral("h.%1").arg(r - 1);
        names << name;
        if (const TracedTensor* t = state_->traced(name))
            for (int p = 0; p < T && p < t->rows; ++p) norms[size_t(r * T + p)] = rowNorm(t->data.data() + p * t->cols, t->cols);
    }
    grid_->setData(std::move(norms), L + 1, T, names, run->tokenTexts);
    if (const LensResultPtr& lens = state_->lens(); lens && lens->rows == L + 1 && lens->positions == T) {
        QStringList top;
        for (int32_t id : lens->top) top << lens->vocabText.at(id);
        grid_->setLens(top, lens->prob);
    } else {
        grid_->setLens({}, {});
    }
    grid_->setSelection(state_->layer() + 1, state_->position());
}

ViewPage::TensorExport StrataView::tensorExport() const {
    TensorExport e;
    e.name = QStringLiteral("residual_norms");
    e.data = grid_->norms();
    if (!e.data.empty()) e.shape = {grid_->rows(), grid_->positions()};
    return e;
}

bool StrataView::hasContent() const { return grid_->rows() > 0; }

// ---------------------------------------------------------------------------------------------- the grid

StrataGrid::StrataGrid(QWidget* parent) : QWidget(parent) { setMouseTracking(true); }

void StrataGrid::setData(std::vector<float> norms, int rows, int positions, QStringList rowNames, QStringList tokens) {
    norms_ = std::move(norms);
    rows_ = rows;
    positions_ = positions;
    rowNames_ = std::move(rowNames);
    tokens_ = std::move(tokens);
    prob_.clear();
    top_.clear();
    // Norms grow by orders of magnitude through the layers: colour by log norm.
    logMin_ = INFINITY;
    logMax_ = -INFINITY;
    for (float v : norms_)
        if (v > 0) logMin_ = std::min(logMin_, std::log10(v)), logMax_ = std::max(logMax_, std::log10(v));
    if (!(logMax_ > logMin_)) logMin_ = 0, logMax_ = 1;
    update();
}

void StrataGrid::setLens(QStringList top, std::vector<float> prob) {
    top_ = std::move(top);
    prob_ = std::move(prob);
    update();
}

void StrataGrid::setColour(Colour c) {
    colour_ = c;
    update();
}

void StrataGrid::setSelection(int row, int position) {
    selRow_ = row;
    selPos_ = position;
    update();
}

QRect StrataGrid::gridRect() const {
    const QFontMetrics fm(font());
    int labelW = 0;
    for (const QString& t : tokens_) labelW = std::max(labelW, fm.horizontalAdvance(t));
    const int cellW = positions_ ? (width() - kLeft - kRight) / positions_ : 0;
    const int bottom = cellW >= fm.horizontalAdvance(QStringLiteral("MMMMMM")) ? 2 * fm.height() + 8 : std::min(110, labelW + 12);
    return QRect(kLeft, kTop, std::max(10, width() - kLeft - kRight), std::max(10, height() - kTop - bottom));
}

QRect StrataGrid::cellRect(int row, int position) const {
    const QRect g = gridRect();
    if (rows_ == 0 || positions_ == 0) return {};
    const double cw = double(g.width()) / positions_, ch = double(g.height()) / rows_;
    return QRectF(g.left() + position * cw, g.top() + (rows_ - 1 - row) * ch, cw, ch).toRect();
}

bool StrataGrid::cellAt(QPoint p, int* row, int* position) const {
    const QRect g = gridRect();
    if (rows_ == 0 || positions_ == 0 || !g.contains(p)) return false;
    *position = std::clamp(int((p.x() - g.left()) * double(positions_) / g.width()), 0, positions_ - 1);
    // Row 0 (x0) is drawn at the bottom.
    *row = std::clamp(rows_ - 1 - int((p.y() - g.top()) * double(rows_) / g.height()), 0, rows_ - 1);
    return true;
}

float StrataGrid::cellValue(int row, int position) const {
    const size_t i = size_t(row * positions_ + position);
    if (colour_ == Colour::LensProbability && !prob_.empty()) return prob_[i];
    const float v = norms_[i];
    return v > 0 ? (std::log10(v) - logMin_) / (logMax_ - logMin_) : 0.0f;
}

void StrataGrid::paintEvent(QPaintEvent*) {
    QPainter g(this);
    g.fillRect(rect(), palette().base());
    const QFontMetrics fm(font());
    if (rows_ == 0 || positions_ == 0) {
        g.setPen(palette().color(QPalette::PlaceholderText));
        g.drawText(rect(), Qt::AlignCenter, tr("Run a prompt to see the residual stream layer by layer."));
        return;
    }
    const QRect gr = gridRect();
    const double cw = double(gr.width()) / positions_, ch = double(gr.height()) / rows_;
    for (int r = 0; r < rows_; ++r) {
        const double y = gr.top() + (rows_ - 1 - r) * ch;
        for (int p = 0; p < positions_; ++p) {
            const QRectF cell(gr.left() + p * cw, y, cw, ch);
            const float v = cellValue(r, p);
            const QColor c = QColor::fromRgb(sequentialColor(v));
            g.fillRect(cell, c);
            if (!top_.isEmpty() && cw >= 24 && ch >= fm.height()) {
                g.setPen(v > 0.6f ? Qt::black : Qt::white);
                g.drawText(cell.adjusted(2, 0, -2, 0), Qt::AlignCenter, fm.elidedText(top_[r * positions_ + p], Qt::ElideRight, int(cw) - 4));
            }
        }
    }
    // Grid lines between positions when they are wide enough to tell apart.
    g.setPen(QColor(255, 255, 255, 60));
    if (cw >= 6)
        for (int p = 1; p < positions_; ++p) g.drawLine(QPointF(gr.left() + p * cw, gr.top()), QPointF(gr.left() + p * cw, gr.bottom()));
    if (ch >= 6)
        for (int r = 1; r < rows_; ++r) g.drawLine(QPointF(gr.left(), gr.top() + r * ch), QPointF(gr.right(), gr.top() + r * ch));

    // Selection: the selected layer's row and the selected position's column, and their cell.
    g.setBrush(Qt::NoBrush);
    if (selRow_ >= 0 && selRow_ < rows_) {
        g.setPen(QPen(QColor(255, 255, 255, 200), 1, Qt::DashLine));
        g.drawRect(QRectF(gr.left(), gr.top() + (rows_ - 1 - selRow_) * ch, gr.width(), ch));
    }
    if (selPos_ >= 0 && selPos_ < positions_) {
        g.setPen(QPen(QColor(255, 255, 255, 200), 1, Qt::DashLine));
        g.drawRect(QRectF(gr.left() + selPos_ * cw, gr.top(), cw, gr.height()));
        if (selRow_ >= 0 && selRow_ < rows_) {
            g.setPen(QPen(QColor(0xe0, 0x1b, 0x24), 2));
            g.drawRect(QRectF(gr.left() + selPos_ * cw, gr.top() + (rows_ - 1 - selRow_) * ch, cw, ch));
        }
    }

    // Row names, thinned when rows are short.
    g.setPen(palette().color(QPalette::Text));
    const int every = std::max(1, int(std::ceil(fm.height() / ch)));
    for (int r = 0; r < rows_; ++r) {
        if (r % every != 0 && r != rows_ - 1 && r != selRow_) continue;
        const double y = gr.top() + (rows_ - 1 - r + 0.5) * ch;
        g.drawText(QRectF(0, y - fm.height() / 2.0, kLeft - 6, fm.height()), Qt::AlignRight | Qt::AlignVCenter, rowNames_.value(r));
    }
    // Token labels under the columns: horizontal when they fit, rotated otherwise.
    const bool horizontal = cw >= fm.horizontalAdvance(QStringLiteral("MMMMMM"));
    const int everyCol = std::max(1, int(std::ceil(fm.height() / cw)));
    for (int p = 0; p < positions_; ++p) {
        if (!horizontal && p % everyCol != 0 && p != selPos_) continue;
        const double x = gr.left() + (p + 0.5) * cw;
        const QString t = tokens_.value(p);
        if (horizontal) {
            g.drawText(QRectF(x - cw / 2, gr.bottom() + 4, cw, fm.height()), Qt::AlignHCenter, fm.elidedText(t, Qt::ElideRight, int(cw) - 2));
            g.drawText(QRectF(x - cw / 2, gr.bottom() + 4 + fm.height(), cw, fm.height()), Qt::AlignHCenter, QString::number(p));
        } else {
            g.save();
            g.translate(x + fm.ascent() / 2.0 - 2, gr.bottom() + 4);
            g.rotate(90);
            g.drawText(0, 0, fm.elidedText(t, Qt::ElideRight, height() - gr.bottom() - 8));
            g.restore();
        }
    }

    // Legend.
    const QRect bar(gr.right() + 14, gr.top(), 12, gr.height());
    ColorScale s;
    s.kind = ColorScale::Kind::Sequential;
    s.lo = 0;
    s.hi = 1;
    g.drawImage(bar, s.legend(bar.width(), bar.height(), true));
    g.setPen(palette().color(QPalette::Text));
    const bool lens = colour_ == Colour::LensProbability && !prob_.empty();
    const QString hi = lens ? QStringLiteral("p=1") : formatValue(std::pow(10.0, logMax_));
    const QString lo = lens ? QStringLiteral("p=0") : formatValue(std::pow(10.0, logMin_));
    g.drawText(QRect(bar.right() + 4, bar.top(), kRight - 20, fm.height()), Qt::AlignLeft, hi);
    g.drawText(QRect(bar.right() + 4, bar.bottom() - fm.height(), kRight - 20, fm.height()), Qt::AlignLeft, lo);
    g.save();
    g.translate(bar.right() + 4 + fm.ascent(), bar.center().y() + 40);
    g.rotate(-90);
    g.drawText(0, 0, lens ? tr("lens probability") : tr("\u2016x\u2016 (log)"));
    g.restore();
}

void StrataGrid::mouseMoveEvent(QMouseEvent* e) {
    int r = 0, p = 0;
    if (!cellAt(e->position().toPoint(), &r, &p)) {
        emit hoverChanged(QString());
        return;
    }
    const size_t i = size_t(r * positions_ + p);
    QString s = tr("%1 \u00b7 position %2 \u2018%3\u2019 \u00b7 \u2016x\u2016 = %4")
                    .arg(rowNames_.value(r))
                    .arg(p)
                    .arg(tokens_.value(p), formatValue(norms_[i]));
    if (!top_.isEmpty())
        s += tr(" \u00b7 logit lens: \u2018%1\u2019 p = %2").arg(top_[int(i)]).arg(formatValue(prob_[i]));
    emit hoverChanged(s);
}

void StrataGrid::mousePressEvent(QMouseEvent* e) {
    int r = 0, p = 0;
    if (e->button() == Qt::LeftButton && cellAt(e->position().toPoint(), &r, &p)) emit cellClicked(r, p);
}

void StrataGrid::mouseDoubleClickEvent(QMouseEvent* e) {
    int r = 0, p = 0;
    if (cellAt(e->position().toPoint(), &r, &p)) emit cellDoubleClicked(r, p);
}

}  // namespace strata::ui
