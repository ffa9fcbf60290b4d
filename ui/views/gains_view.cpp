#include "views/gains_view.hpp"

#include <algorithm>
#include <cmath>

#include <QMouseEvent>
#include <QPainter>
#include <QSplitter>

#include "views/plot_util.hpp"
#include "views/vector_plot.hpp"

namespace strata::ui {

namespace {
constexpr int kLeft = 56, kRight = 16, kTop = 22, kBottom = 40;

float medianOf(std::vector<float> v) {
    if (v.empty()) return 0;
    const size_t m = v.size() / 2;
    std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(m), v.end());
    return v[m];
}
}  // namespace

GainStats GainStats::of(const std::string& name, const std::vector<float>& g) {
    GainStats s;
    s.name = name;
    if (g.empty()) return s;
    const auto [mn, mx] = std::minmax_element(g.begin(), g.end());
    s.min = *mn;
    s.max = *mx;
    s.argmin = mn - g.begin();
    s.argmax = mx - g.begin();
    s.median = medianOf(g);
    std::vector<float> dev(g.size());
    for (size_t i = 0; i < g.size(); ++i) dev[i] = std::fabs(g[i] - s.median);
    // Robust spread: 1.4826 * MAD estimates the standard deviation of the bulk, untouched by the outliers.
    const double sigma = 1.4826 * medianOf(dev);
    std::vector<std::pair<double, int64_t>> far;
    for (size_t i = 0; i < g.size(); ++i) {
        const double z = sigma > 0 ? dev[i] / sigma : (dev[i] > 0 ? INFINITY : 0);
        if (z > kOutlierZ) far.emplace_back(z, int64_t(i));
    }
    std::sort(far.begin(), far.end(), [](auto& a, auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
    for (size_t i = 0; i < far.size() && i < 8; ++i) s.outliers.push_back(far[i].second);
    return s;
}

GainsView::GainsView(ExplorerState* state, EngineClient* client, QWidget* parent)
    : ViewPage(tr("RMSNorm gains"), state, client, parent) {
    setTabName(tr("Gains"));
    vector_ = new VectorPlot;
    vector_->setReferenceLine(1.0f);
    summary_ = new GainSummaryPlot;
    auto* split = new QSplitter(Qt::Vertical);
    split->addWidget(vector_);
    split->addWidget(summary_);
    setCanvas(split);
    controls()->addStretch(1);
    setReadout(tr("Gains start at 1 (dashed line); red dots mark features far from the median (robust z > %1).").arg(GainStats::kOutlierZ));

    auto readout = [this](const QString& s) {
        if (!s.isEmpty()) setReadout(s);
    };
    connect(vector_, &VectorPlot::hoverChanged, this, readout);
    connect(summary_, &GainSummaryPlot::hoverChanged, this, readout);
    connect(summary_, &GainSummaryPlot::normClicked, this, [this](const QString& name) {
        if (name == QLatin1String("norm")) {
            emit partRequested(QStringLiteral("norm"), -1);
            return;
        }
        const QStringList parts = name.split(QLatin1Char('.'));  // layers.N.attention_norm
        emit partRequested(QStringLiteral("block/") + parts.value(2), parts.value(1).toInt());
    });
    connect(state_, &ExplorerState::modelChanged, this, &GainsView::rebuild);
    connect(state_, &ExplorerState::layerChanged, this, &GainsView::refresh);
    connect(state_, &ExplorerState::partChanged, this, [this] {
        refresh();
        emit cardChanged();
    });
}

QString GainsView::selectedNorm() const {
    const QString key = state_->part().key;
    if (key == QLatin1String("norm")) return QStringLiteral("norm");
    if (key == QLatin1String("block/ffn_norm")) return QStringLiteral("layers.%1.ffn_norm").arg(state_->layer());
    return QStringLiteral("layers.%1.attention_norm").arg(state_->layer());
}

QString GainsView::cardId() const {
    const QString n = selectedNorm();
    return n == QLatin1String("norm") ? QStringLiteral("w_norm") : n.endsWith(QLatin1String("ffn_norm")) ? QStringLiteral("w_ffn_norm") : QStringLiteral("w_attention_norm");
}

bool GainsView::hasContent() const { return !stats_.empty(); }

void GainsView::rebuild() {
    stats_.clear();
    if (const ModelSummaryPtr& m = state_->model()) {
        for (int l = 0; l < m->config.n_layers; ++l)
            for (const char* which : {"attention_norm", "ffn_norm"}) {
                const std::string name = "layers." + std::to_string(l) + "." + which;
                if (auto it = m->gains.find(name); it != m->gains.end()) stats_.push_back(GainStats::of(name, it->second));
            }
        if (auto it = m->gains.find("norm"); it != m->gains.end()) stats_.push_back(GainStats::of("norm", it->second));
    }
    summary_->setStats(&stats_);
    refresh();
}

void GainsView::refresh() {
    const ModelSummaryPtr& m = state_->model();
    const QString name = selectedNorm();
    summary_->setSelected(name);
    const auto it = m ? m->gains.find(name.toStdString()) : decltype(m->gains)::const_iterator{};
    if (!m || it == m->gains.end()) {
        vector_->clear(tr("Open a model to see its RMSNorm gains."));
        return;
    }
    vector_->setVector(it->second, tr("feature"), QStringLiteral("\u03b3"));
    for (const GainStats& s : stats_)
        if (s.name == it->first) vector_->setMarked(s.outliers);
}

ViewPage::TensorExport GainsView::tensorExport() const {
    TensorExport e;
    e.name = selectedNorm();
    if (const ModelSummaryPtr& m = state_->model())
        if (auto it = m->gains.find(e.name.toStdString()); it != m->gains.end()) {
            e.data = it->second;
            e.shape = {int64_t(it->second.size())};
        }
    return e;
}

// ---------------------------------------------------------------------------------------------- summary

GainSummaryPlot::GainSummaryPlot(QWidget* parent) : QWidget(parent) { setMouseTracking(true); }

void GainSummaryPlot::setStats(const std::vector<GainStats>* stats) {
    stats_ = stats;
    lo_ = INFINITY;
    hi_ = -INFINITY;
    for (const GainStats& s : *stats_) lo_ = std::min(lo_, s.min), hi_ = std::max(hi_, s.max);
    if (!(hi_ > lo_)) lo_ = 0, hi_ = 2;
    const float pad = (hi_ - lo_) * 0.06f;
    lo_ -= pad;
    hi_ += pad;
    update();
}

void GainSummaryPlot::setSelected(const QString& name) {
    selected_ = name;
    update();
}

QRect GainSummaryPlot::plotRect() const { return QRect(kLeft, kTop, std::max(10, width() - kLeft - kRight), std::max(10, height() - kTop - kBottom)); }

int GainSummaryPlot::columnAt(QPoint pt) const {
    const QRect p = plotRect();
    if (!stats_ || stats_->empty() || !p.contains(pt)) return -1;
    return std::clamp(int((pt.x() - p.left()) * double(stats_->size()) / p.width()), 0, int(stats_->size()) - 1);
}

void GainSummaryPlot::paintEvent(QPaintEvent*) {
    QPainter g(this);
    g.fillRect(rect(), palette().base());
    const QFontMetrics fm(font());
    if (!stats_ || stats_->empty()) return;
    const QRect p = plotRect();
    auto yOf = [&](float v) { return p.bottom() - (double(v) - lo_) / (double(hi_) - lo_) * p.height(); };
    g.setPen(palette().color(QPalette::Text));
    g.drawText(QRect(kLeft, 2, p.width(), fm.height()), Qt::AlignLeft,
               tr("every RMSNorm gain: min \u2013 max (line), median (bar), outlier features (red)"));
    for (double t : niceTicks(lo_, hi_, std::max(2, p.height() / 36))) {
        const double y = yOf(float(t));
        g.setPen(faintText(palette(), 30));
        g.drawLine(QPointF(p.left(), y), QPointF(p.right(), y));
        g.setPen(palette().color(QPalette::Text));
        g.drawText(QRectF(0, y - fm.height() / 2.0, kLeft - 6, fm.height()), Qt::AlignRight | Qt::AlignVCenter, formatValue(t));
    }
    g.setPen(QPen(QColor(0x88, 0x88, 0x88), 1, Qt::DashLine));
    g.drawLine(QPointF(p.left(), yOf(1.0f)), QPointF(p.right(), yOf(1.0f)));

    const int n = int(stats_->size());
    const double slot = double(p.width()) / n;
    g.setRenderHint(QPainter::Antialiasing);
    for (int i = 0; i < n; ++i) {
        const GainStats& s = (*stats_)[size_t(i)];
        const double cx = p.left() + (i + 0.5) * slot;
        const bool sel = QString::fromStdString(s.name) == selected_;
        if (sel) g.fillRect(QRectF(p.left() + i * slot, p.top(), slot, p.height()), QColor(0xe0, 0x1b, 0x24, 30));
        const bool ffn = s.name.find("ffn_norm") != std::string::npos;
        const QColor c = s.name == "norm" ? faintText(palette(), 190) : ffn ? QColor(0xe6, 0x7e, 0x22) : QColor(0x2b, 0x83, 0xba);
        g.setPen(QPen(c, std::max(1.5, std::min(4.0, slot * 0.25))));
        g.drawLine(QPointF(cx, yOf(s.min)), QPointF(cx, yOf(s.max)));
        g.setPen(QPen(c.darker(140), 2));
        const double hw = std::max(2.0, slot * 0.35);
        g.drawLine(QPointF(cx - hw, yOf(s.median)), QPointF(cx + hw, yOf(s.median)));
        g.setPen(Qt::NoPen);
        g.setBrush(QColor(0xc0, 0x39, 0x2b));
        // Outliers sit at the ends of the range: mark an end when its feature is one.
        auto outlier = [&](int64_t f) { return std::find(s.outliers.begin(), s.outliers.end(), f) != s.outliers.end(); };
        if (outlier(s.argmax)) g.drawEllipse(QPointF(cx, yOf(s.max)), 3, 3);
        if (outlier(s.argmin)) g.drawEllipse(QPointF(cx, yOf(s.min)), 3, 3);
    }
    g.setRenderHint(QPainter::Antialiasing, false);
    g.setBrush(Qt::NoBrush);
    // Axis: block numbers under their pairs of norms, and "norm" for the final one.
    g.setPen(palette().color(QPalette::Text));
    const int every = std::max(1, int(std::ceil(n * fm.horizontalAdvance(QStringLiteral("00")) / double(p.width()))));
    for (int i = 0; i < n; ++i) {
        const GainStats& s = (*stats_)[size_t(i)];
        QString label;
        if (s.name == "norm") label = QStringLiteral("norm");
        else if (s.name.find("attention_norm") != std::string::npos && ((i / 2) % every == 0)) label = QString::number(i / 2);
        if (label.isEmpty()) continue;
        g.drawText(QRectF(p.left() + i * slot - 20, p.bottom() + 3, label == QLatin1String("norm") ? slot + 40 : 2 * slot + 40, fm.height()),
                   Qt::AlignHCenter, label);
    }
    g.drawText(QRect(p.left(), height() - fm.height(), p.width(), fm.height()), Qt::AlignHCenter,
               tr("block: attention_norm (blue), ffn_norm (orange); final norm (grey)"));
    g.setPen(palette().color(QPalette::Mid));
    g.drawRect(p.adjusted(0, 0, -1, -1));
}

void GainSummaryPlot::mouseMoveEvent(QMouseEvent* e) {
    const int i = columnAt(e->position().toPoint());
    if (i < 0) return;
    const GainStats& s = (*stats_)[size_t(i)];
    QStringList out;
    for (int64_t f : s.outliers) out << QString::number(f);
    emit hoverChanged(tr("%1 \u00b7 min %2 (feature %3) \u00b7 median %4 \u00b7 max %5 (feature %6)%7")
                          .arg(QString::fromStdString(s.name), formatValue(s.min))
                          .arg(s.argmin)
                          .arg(formatValue(s.median), formatValue(s.max))
                          .arg(s.argmax)
                          .arg(out.isEmpty() ? QString() : tr(" \u00b7 outliers: %1").arg(out.join(", "))));
}

void GainSummaryPlot::mousePressEvent(QMouseEvent* e) {
    const int i = columnAt(e->position().toPoint());
    if (i >= 0) emit normClicked(QString::fromStdString((*stats_)[size_t(i)].name));
}

}  // namespace strata::ui
