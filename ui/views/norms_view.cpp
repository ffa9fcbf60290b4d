#include "views/norms_view.hpp"

#include <algorithm>
#include <cmath>

#include <QCheckBox>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QSplitter>

#include "views/plot_util.hpp"

namespace strata::ui {

namespace {
constexpr int kLeft = 62, kRight = 16, kTop = 22, kBottom = 36;
const QColor kSelected(0x1f, 0x5f, 0xa8);
const QColor kAttention(0x2b, 0x83, 0xba);
const QColor kFfn(0xe6, 0x7e, 0x22);

float norm(const float* x, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += double(x[i]) * x[i];
    return float(std::sqrt(s));
}

void fill(const ExplorerState& st, const QString& name, int row, int T, std::vector<float>& out) {
    const TracedTensor* t = st.traced(name);
    if (!t) return;
    for (int p = 0; p < T && p < t->rows; ++p) out[size_t(row * T + p)] = norm(t->data.data() + p * t->cols, t->cols);
}
}  // namespace

ResidualNorms ResidualNorms::from(const ExplorerState& st) {
    ResidualNorms n;
    if (!st.run()) return n;
    n.layers = st.layers();
    n.positions = st.positions();
    const int L = n.layers, T = n.positions;
    n.residual.assign(size_t((L + 1) * T), 0.0f);
    n.attention.assign(size_t(L * T), 0.0f);
    n.ffn.assign(size_t(L * T), 0.0f);
    fill(st, QStringLiteral("x0"), 0, T, n.residual);
    for (int l = 0; l < L; ++l) {
        fill(st, QStringLiteral("h.%1").arg(l), l + 1, T, n.residual);
        fill(st, QStringLiteral("layers.%1.attention_out").arg(l), l, T, n.attention);
        fill(st, QStringLiteral("layers.%1.ffn_out").arg(l), l, T, n.ffn);
    }
    return n;
}

NormsView::NormsView(ExplorerState* state, EngineClient* client, QWidget* parent)
    : ViewPage(tr("Residual norms"), state, client, parent) {
    setTabName(tr("Norms"));
    auto* log = new QCheckBox(tr("log scale"));
    controls()->addStretch(1);
    controls()->addWidget(log);
    lines_ = new NormLinesPlot;
    bars_ = new ContributionPlot;
    auto* split = new QSplitter(Qt::Vertical);
    split->addWidget(lines_);
    split->addWidget(bars_);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);
    setCanvas(split);
    setReadout(tr("Hover a layer to read the norms; click to select it."));

    connect(log, &QCheckBox::toggled, lines_, &NormLinesPlot::setLogScale);
    auto readout = [this](const QString& s) {
        if (!s.isEmpty()) setReadout(s);
    };
    connect(lines_, &NormLinesPlot::hoverChanged, this, readout);
    connect(bars_, &ContributionPlot::hoverChanged, this, readout);
    connect(lines_, &NormLinesPlot::rowClicked, this, [this](int row) {
        if (row == 0)
            emit partRequested(QStringLiteral("tok_embeddings"), -1);
        else
            emit partRequested(QStringLiteral("block"), row - 1);
    });
    connect(bars_, &ContributionPlot::layerClicked, this, [this](int layer, bool ffn) {
        emit partRequested(ffn ? QStringLiteral("block/feed_forward") : QStringLiteral("block/attention"), layer);
    });
    connect(state_, &ExplorerState::runChanged, this, &NormsView::refresh);
    auto select = [this] {
        const bool embedding = state_->part().key == QLatin1String("tok_embeddings");
        lines_->setSelection(embedding ? 0 : state_->layer() + 1, state_->position());
        bars_->setSelection(embedding ? -1 : state_->layer(), state_->position());
    };
    connect(state_, &ExplorerState::layerChanged, this, select);
    connect(state_, &ExplorerState::positionChanged, this, select);
    connect(state_, &ExplorerState::partChanged, this, select);
}

void NormsView::refresh() {
    norms_ = ResidualNorms::from(*state_);
    const QStringList tokens = state_->run() ? state_->run()->tokenTexts : QStringList();
    lines_->setData(&norms_, tokens);
    bars_->setData(&norms_, tokens);
    lines_->setSelection(state_->layer() + 1, state_->position());
    bars_->setSelection(state_->layer(), state_->position());
}

ViewPage::TensorExport NormsView::tensorExport() const {
    TensorExport e;
    e.name = QStringLiteral("residual_norms");
    if (norms_.positions == 0) return e;
    e.data = norms_.residual;
    e.shape = {norms_.layers + 1, norms_.positions};
    return e;
}

// ---------------------------------------------------------------------------------------------- lines

NormLinesPlot::NormLinesPlot(QWidget* parent) : QWidget(parent) { setMouseTracking(true); }

void NormLinesPlot::setData(const ResidualNorms* n, QStringList tokens) {
    n_ = n;
    tokens_ = std::move(tokens);
    lo_ = INFINITY;
    hi_ = 0;
    for (float v : n_->residual)
        if (v > 0) lo_ = std::min(lo_, v), hi_ = std::max(hi_, v);
    if (!(hi_ > 0)) lo_ = 0.1f, hi_ = 1;
    update();
}

void NormLinesPlot::setSelection(int layerRow, int position) {
    selRow_ = layerRow;
    selPos_ = position;
    update();
}

void NormLinesPlot::setLogScale(bool on) {
    log_ = on;
    update();
}

QRect NormLinesPlot::plotRect() const { return QRect(kLeft, kTop, std::max(10, width() - kLeft - kRight), std::max(10, height() - kTop - kBottom)); }

double NormLinesPlot::yOf(float v, const QRect& p) const {
    if (log_) {
        const double a = std::log10(std::max(lo_, 1e-6f)), b = std::log10(hi_);
        const double f = (std::log10(std::max(v, 1e-6f)) - a) / std::max(1e-9, b - a);
        return p.bottom() - f * p.height();
    }
    return p.bottom() - double(v) / (hi_ * 1.05) * p.height();
}

int NormLinesPlot::rowAt(int x) const {
    const QRect p = plotRect();
    const int rows = n_ ? n_->layers + 1 : 0;
    if (rows < 2) return 0;
    return std::clamp(int(std::lround((x - p.left()) * double(rows - 1) / p.width())), 0, rows - 1);
}

void NormLinesPlot::paintEvent(QPaintEvent*) {
    QPainter g(this);
    g.fillRect(rect(), palette().base());
    const QFontMetrics fm(font());
    if (!n_ || n_->positions == 0) {
        g.setPen(palette().color(QPalette::PlaceholderText));
        g.drawText(rect(), Qt::AlignCenter, tr("Run a prompt to see the residual norms."));
        return;
    }
    const QRect p = plotRect();
    const int rows = n_->layers + 1, T = n_->positions;
    auto xOf = [&](int r) { return p.left() + (rows > 1 ? double(r) / (rows - 1) : 0.5) * p.width(); };
    g.setPen(palette().color(QPalette::Text));
    g.drawText(QRect(kLeft, 2, p.width(), fm.height()), Qt::AlignLeft,
               tr("\u2016x\u2016 of every position after each layer (position %1 \u2018%2\u2019 bold)").arg(selPos_).arg(tokens_.value(selPos_)));
    // Value axis.
    const std::vector<double> ticks = log_ ? std::vector<double>{} : niceTicks(0, hi_ * 1.05, std::max(2, p.height() / 40));
    for (double t : ticks) {
        const double y = yOf(float(t), p);
        g.setPen(faintText(palette(), 30));
        g.drawLine(QPointF(p.left(), y), QPointF(p.right(), y));
        g.setPen(palette().color(QPalette::Text));
        g.drawText(QRectF(0, y - fm.height() / 2.0, kLeft - 6, fm.height()), Qt::AlignRight | Qt::AlignVCenter, formatValue(t));
    }
    if (log_) {
        for (double e = std::floor(std::log10(std::max(lo_, 1e-6f))); e <= std::ceil(std::log10(hi_)); e += 1) {
            const double y = yOf(float(std::pow(10.0, e)), p);
            if (y < p.top() - 1 || y > p.bottom() + 1) continue;
            g.setPen(faintText(palette(), 30));
            g.drawLine(QPointF(p.left(), y), QPointF(p.right(), y));
            g.setPen(palette().color(QPalette::Text));
            g.drawText(QRectF(0, y - fm.height() / 2.0, kLeft - 6, fm.height()), Qt::AlignRight | Qt::AlignVCenter, formatValue(std::pow(10.0, e)));
        }
    }
    // Layer axis.
    const int every = std::max(1, int(std::ceil(rows * fm.horizontalAdvance(QStringLiteral("h.00 ")) / double(p.width()))));
    for (int r = 0; r < rows; r += every) {
        const double x = xOf(r);
        g.setPen(palette().color(QPalette::Text));
        g.drawLine(QPointF(x, p.bottom()), QPointF(x, p.bottom() + 3));
        g.drawText(QRectF(x - 30, p.bottom() + 4, 60, fm.height()), Qt::AlignHCenter, r == 0 ? QStringLiteral("x0") : QStringLiteral("h.%1").arg(r - 1));
    }
    g.drawText(QRect(p.left(), height() - fm.height(), p.width(), fm.height()), Qt::AlignHCenter, tr("layer (residual after block)"));
    g.setPen(palette().color(QPalette::Mid));
    g.drawRect(p.adjusted(0, 0, -1, -1));

    if (selRow_ >= 0 && selRow_ < rows) {
        g.setPen(QPen(QColor(0xe0, 0x1b, 0x24, 140), 1, Qt::DashLine));
        g.drawLine(QPointF(xOf(selRow_), p.top()), QPointF(xOf(selRow_), p.bottom()));
    }
    g.setRenderHint(QPainter::Antialiasing);
    auto line = [&](int pos) {
        QPainterPath path;
        for (int r = 0; r < rows; ++r) {
            const QPointF pt(xOf(r), yOf(n_->residual[size_t(r * T + pos)], p));
            if (r == 0) path.moveTo(pt);
            else path.lineTo(pt);
        }
        return path;
    };
    g.setPen(QPen(QColor(0x80, 0x80, 0x80, 90), 1));
    for (int pos = 0; pos < T; ++pos)
        if (pos != selPos_) g.drawPath(line(pos));
    if (selPos_ >= 0 && selPos_ < T) {
        g.setPen(QPen(kSelected, 2.5));
        g.drawPath(line(selPos_));
        g.setBrush(kSelected);
        for (int r = 0; r < rows; ++r) g.drawEllipse(QPointF(xOf(r), yOf(n_->residual[size_t(r * T + selPos_)], p)), 2.5, 2.5);
    }
}

void NormLinesPlot::mouseMoveEvent(QMouseEvent* e) {
    if (!n_ || n_->positions == 0 || !plotRect().contains(e->position().toPoint())) return;
    const int r = rowAt(int(e->position().x()));
    const int T = n_->positions;
    float mn = INFINITY, mx = 0;
    for (int p = 0; p < T; ++p) mn = std::min(mn, n_->residual[size_t(r * T + p)]), mx = std::max(mx, n_->residual[size_t(r * T + p)]);
    const int pos = std::clamp(selPos_, 0, T - 1);
    emit hoverChanged(tr("%1 \u00b7 position %2 \u2018%3\u2019: \u2016x\u2016 = %4 \u00b7 over all positions %5 \u2013 %6")
                          .arg(r == 0 ? QStringLiteral("x0") : QStringLiteral("h.%1").arg(r - 1))
                          .arg(pos)
                          .arg(tokens_.value(pos), formatValue(n_->residual[size_t(r * T + pos)]), formatValue(mn), formatValue(mx)));
}

void NormLinesPlot::mousePressEvent(QMouseEvent* e) {
    if (n_ && n_->positions > 0 && plotRect().contains(e->position().toPoint())) emit rowClicked(rowAt(int(e->position().x())));
}

// ---------------------------------------------------------------------------------------------- bars

ContributionPlot::ContributionPlot(QWidget* parent) : QWidget(parent) { setMouseTracking(true); }

void ContributionPlot::setData(const ResidualNorms* n, QStringList tokens) {
    n_ = n;
    tokens_ = std::move(tokens);
    update();
}

void ContributionPlot::setSelection(int layer, int position) {
    selLayer_ = layer;
    selPos_ = position;
    update();
}

QRect ContributionPlot::plotRect() const { return QRect(kLeft, kTop, std::max(10, width() - kLeft - kRight), std::max(10, height() - kTop - kBottom)); }

bool ContributionPlot::barAt(QPoint pt, int* layer, bool* ffn) const {
    const QRect p = plotRect();
    if (!n_ || n_->layers == 0 || !p.contains(pt)) return false;
    const double slot = double(p.width()) / n_->layers;
    const double x = pt.x() - p.left();
    *layer = std::clamp(int(x / slot), 0, n_->layers - 1);
    *ffn = std::fmod(x, slot) > slot / 2;
    return true;
}

void ContributionPlot::paintEvent(QPaintEvent*) {
    QPainter g(this);
    g.fillRect(rect(), palette().base());
    const QFontMetrics fm(font());
    if (!n_ || n_->positions == 0 || selPos_ < 0 || selPos_ >= n_->positions) {
        g.setPen(palette().color(QPalette::PlaceholderText));
        g.drawText(rect(), Qt::AlignCenter, tr("Run a prompt to see what each block adds."));
        return;
    }
    const QRect p = plotRect();
    const int L = n_->layers, T = n_->positions;
    float hi = 0;
    for (int l = 0; l < L; ++l) hi = std::max({hi, n_->attention[size_t(l * T + selPos_)], n_->ffn[size_t(l * T + selPos_)]});
    if (!(hi > 0)) hi = 1;
    hi *= 1.05f;
    g.setPen(palette().color(QPalette::Text));
    g.drawText(QRect(kLeft, 2, p.width(), fm.height()), Qt::AlignLeft,
               tr("what each block adds at position %1 \u2018%2\u2019:").arg(selPos_).arg(tokens_.value(selPos_)));
    const int legendX = kLeft + fm.horizontalAdvance(tr("what each block adds at position %1 \u2018%2\u2019:").arg(selPos_).arg(tokens_.value(selPos_))) + 16;
    g.fillRect(legendX, 2 + fm.height() / 4, 10, 10, kAttention);
    g.drawText(legendX + 14, 2 + fm.ascent(), tr("\u2016attention_out\u2016"));
    const int legend2 = legendX + 24 + fm.horizontalAdvance(tr("\u2016attention_out\u2016"));
    g.fillRect(legend2, 2 + fm.height() / 4, 10, 10, kFfn);
    g.drawText(legend2 + 14, 2 + fm.ascent(), tr("\u2016ffn_out\u2016"));

    for (double t : niceTicks(0, hi, std::max(2, p.height() / 36))) {
        const double y = p.bottom() - t / hi * p.height();
        g.setPen(faintText(palette(), 30));
        g.drawLine(QPointF(p.left(), y), QPointF(p.right(), y));
        g.setPen(palette().color(QPalette::Text));
        g.drawText(QRectF(0, y - fm.height() / 2.0, kLeft - 6, fm.height()), Qt::AlignRight | Qt::AlignVCenter, formatValue(t));
    }
    const double slot = double(p.width()) / L;
    const double bw = std::max(1.0, slot * 0.38);
    if (selLayer_ >= 0 && selLayer_ < L) g.fillRect(QRectF(p.left() + selLayer_ * slot, p.top(), slot, p.height()), QColor(0xe0, 0x1b, 0x24, 28));
    for (int l = 0; l < L; ++l) {
        const double x = p.left() + l * slot + slot * 0.1;
        const double ha = n_->attention[size_t(l * T + selPos_)] / hi * p.height();
        const double hf = n_->ffn[size_t(l * T + selPos_)] / hi * p.height();
        g.fillRect(QRectF(x, p.bottom() - ha, bw, ha), kAttention);
        g.fillRect(QRectF(x + bw, p.bottom() - hf, bw, hf), kFfn);
    }
    g.setPen(palette().color(QPalette::Text));
    const int every = std::max(1, int(std::ceil(L * fm.horizontalAdvance(QStringLiteral("00 ")) / double(p.width()))));
    for (int l = 0; l < L; l += every)
        g.drawText(QRectF(p.left() + l * slot, p.bottom() + 3, slot, fm.height()), Qt::AlignHCenter, QString::number(l));
    g.drawText(QRect(p.left(), height() - fm.height(), p.width(), fm.height()), Qt::AlignHCenter, tr("block (layers.N)"));
    g.setPen(palette().color(QPalette::Mid));
    g.drawRect(p.adjusted(0, 0, -1, -1));
}

void ContributionPlot::mouseMoveEvent(QMouseEvent* e) {
    int l = 0;
    bool ffn = false;
    if (!barAt(e->position().toPoint(), &l, &ffn) || selPos_ < 0 || selPos_ >= n_->positions) return;
    const int T = n_->positions;
    const float a = n_->attention[size_t(l * T + selPos_)], f = n_->ffn[size_t(l * T + selPos_)];
    const float before = n_->residual[size_t(l * T + selPos_)];
    emit hoverChanged(tr("layers.%1 at position %2: \u2016attention_out\u2016 = %3, \u2016ffn_out\u2016 = %4, \u2016x\u2016 entering the block = %5")
                          .arg(l)
                          .arg(selPos_)
                          .arg(formatValue(a), formatValue(f), formatValue(before)));
}

void ContributionPlot::mousePressEvent(QMouseEvent* e) {
    int l = 0;
    bool ffn = false;
    if (barAt(e->position().toPoint(), &l, &ffn)) emit layerClicked(l, ffn);
}

}  // namespace strata::ui
