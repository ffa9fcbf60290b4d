#include "views/tensor_view.hpp"

#include <algorithm>
#include <cmath>

#include <QButtonGroup>
#include <QComboBox>
#include <QLabel>
#include <QHBoxLayout>
#include <QMenu>
#include <QRadioButton>
#include <QToolButton>

#include "explorer/engine_client.hpp"
#include "explorer/intervention_bar.hpp"
#include "views/heatmap_widget.hpp"
#include "views/plot_util.hpp"

namespace strata::ui {

namespace {
constexpr int kPreviewRows = 512;
constexpr int kPreviewCols = 1024;
}

TensorView::TensorView(ExplorerState* state, EngineClient* client, QWidget* parent)
    : ViewPage(tr("Tensor"), state, client, parent) {
    name_ = new QLabel;
    name_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    activationButton_ = new QRadioButton(tr("activation"));
    weightButton_ = new QRadioButton(tr("weight"));
    activationButton_->setChecked(true);
    auto* group = new QButtonGroup(this);
    group->addButton(activationButton_);
    group->addButton(weightButton_);
    range_ = new QComboBox;
    range_->addItem(tr("range \u00b1 99th percentile of |x|"));
    range_->addItem(tr("range \u00b1 max |x|"));
    range_->setToolTip(tr("The diverging colour map is symmetric around 0; a robust range keeps a few outliers from washing out the rest"));
    auto* fit = new QToolButton;
    fit->setText(tr("Fit"));
    fit->setToolTip(tr("Show every feature again (double-click the map does the same)"));
    controls()->addWidget(name_, 1);
    controls()->addWidget(activationButton_);
    controls()->addWidget(weightButton_);
    controls()->addWidget(range_);
    controls()->addWidget(fit);

    heatmap_ = new HeatmapWidget;
    setCanvas(heatmap_);
    setReadout(tr("Hover the map to read values; wheel zooms features (Ctrl+wheel: positions), drag pans."));

    connect(heatmap_, &HeatmapWidget::hoverChanged, this, [this](const QString& s) {
        if (!s.isEmpty()) setReadout(s);
    });
    connect(heatmap_, &HeatmapWidget::rowClicked, this, [this](int row) {
        if (!showWeight_ && heatmap_->rows() == state_->positions()) state_->setPosition(row);
    });
    connect(fit, &QToolButton::clicked, heatmap_, &HeatmapWidget::resetZoom);
    heatmap_->setContextMenuPolicy(Qt::CustomContextMenu);
    connect(heatmap_, &QWidget::customContextMenuRequested, this, &TensorView::showColumnMenu);
    connect(weightButton_, &QRadioButton::toggled, this, [this](bool on) { setShowWeight(on); });
    connect(range_, &QComboBox::currentIndexChanged, this, [this] { refresh(); });

    connect(state_, &ExplorerState::modelChanged, this, [this] {
        previews_.clear();
        refresh();
    });
    connect(state_, &ExplorerState::runChanged, this, &TensorView::refresh);
    connect(state_, &ExplorerState::partChanged, this, &TensorView::refresh);
    connect(state_, &ExplorerState::layerChanged, this, &TensorView::refresh);
    connect(state_, &ExplorerState::positionChanged, this, [this](int p) {
        if (!showWeight_) heatmap_->setSelectedRow(p);
    });
    connect(client_, &EngineClient::weightPreviewFinished, this, &TensorView::onPreview);
}

void TensorView::setShowWeight(bool weight) {
    if (weight == showWeight_) return;
    showWeight_ = weight;
    const QSignalBlocker b1(weightButton_), b2(activationButton_);
    weightButton_->setChecked(weight);
    activationButton_->setChecked(!weight);
    refresh();
    emit cardChanged();
}

QString TensorView::shownName() const {
    const Part& part = state_->part();
    return state_->resolve(showWeight_ ? part.weight : part.tensor);
}

QString TensorView::cardId() const { return showWeight_ ? state_->part().weightCard : state_->part().tensorCard; }

bool TensorView::hasContent() const { return heatmap_->rows() > 0; }

QString TensorView::columnSpec(int64_t col) const {
    if (showWeight_ || !state_->model() || col < 0) return {};
    const QString name = shownName();
    const int layer = state_->layer();
    if (name == QStringLiteral("layers.%1.ffn_hidden").arg(layer))
        return QStringLiteral("layers.%1.feed_forward.neurons.%2").arg(layer).arg(col);
    if (name == QStringLiteral("layers.%1.attention.heads").arg(layer))
        return QStringLiteral("layers.%1.attention.heads.%2").arg(layer).arg(col / state_->model()->config.head_dim);
    return {};
}

void TensorView::showColumnMenu(const QPoint& pos) {
    const HeatmapWidget::Probe p = heatmap_->probe(pos);
    if (!p.valid) return;
    const QString spec = columnSpec(p.col);
    if (spec.isEmpty()) return;
    QMenu menu;
    const bool neuron = spec.contains(QLatin1String("neurons"));
    const QString what = neuron ? tr("neuron %1 of layers.%2").arg(p.col).arg(state_->layer())
                                : tr("head %1 of layers.%2").arg(p.col / state_->model()->config.head_dim).arg(state_->layer());
    addAblationActions(&menu, state_, spec, what);
    menu.exec(heatmap_->mapToGlobal(pos));
}

void TensorView::refresh() {
    const Part& part = state_->part();
    const bool hasTensor = !part.tensor.isEmpty();
    const bool hasWeight = !part.weight.isEmpty();
    activationButton_->setEnabled(hasTensor);
    weightButton_->setEnabled(hasWeight);
    // Follow what the part has: ops have only an activation, w1/w3 only a weight.
    if (showWeight_ && !hasWeight && hasTensor) {
        setShowWeight(false);
        return;
    }
    if (!showWeight_ && !hasTensor && hasWeight) {
        setShowWeight(true);
        return;
    }
    if (!state_->model()) {
        name_->clear();
        heatmap_->clear(tr("Open a model (File \u25b8 Open) or wait for the demonstration model."));
        return;
    }
    if (part.key.isEmpty()) {
        name_->clear();
        heatmap_->clear(tr("Select a part of the model in the atlas."));
        return;
    }
    if (showWeight_)
        showWeight(state_->resolve(part.weight));
    else
        showActivation(state_->resolve(part.tensor));
}

void TensorView::showActivation(const QString& name) {
    const TracedTensor* t = state_->traced(name);
    name_->setText(QStringLiteral("<code>%1</code>").arg(name));
    if (!t) {
        heatmap_->clear(state_->run() ? tr("%1 was not kept in this run's trace.").arg(name)
                                      : tr("Run a prompt to see %1.").arg(name));
        return;
    }
    const bool probs = name.endsWith(QLatin1String(".probs"));
    const RunResult& run = *state_->run();
    name_->setText(QStringLiteral("<code>%1</code> &nbsp;[%2, %3]%4")
                       .arg(name)
                       .arg(t->rows)
                       .arg(groupDigits(uint64_t(t->cols)))
                       .arg(state_->showingDiff() ? tr(" &nbsp;<b>diff: ablated − clean</b>")
                            : state_->run()->ablations.empty() ? QString()
                                                               : tr(" &nbsp;<b>ablated pass</b>")));
    if (probs) {
        // [n_heads * T, T0 + T], rows head-major: label each row by head and query token.
        const int64_t T = int64_t(run.tokens.size());
        QStringList rows;
        for (int64_t r = 0; r < t->rows; ++r)
            rows << QStringLiteral("h%1 %2").arg(r / T).arg(run.tokenTexts.value(int(r % T)));
        if (state_->showingDiff()) {
            heatmap_->setScaleKind(ColorScale::Kind::Diverging);
            heatmap_->setAutoRange();
        } else {
            heatmap_->setScaleKind(ColorScale::Kind::Sequential);
            heatmap_->setFixedRange(0.0f, 1.0f);
        }
        heatmap_->setAxisNames(tr("head \u00b7 query"), tr("key"));
        heatmap_->setRowLabels(rows);
        heatmap_->setColumnLabels(run.tokenTexts);
        heatmap_->setMatrix(t->data, t->rows, t->cols);
        heatmap_->setSelectedRow(-1);
        return;
    }
    heatmap_->setScaleKind(ColorScale::Kind::Diverging);
    if (range_->currentIndex() == 0) heatmap_->setAutoRange();
    heatmap_->setAxisNames(tr("position"), name.endsWith(QLatin1String("ffn_hidden")) ? tr("hidden feature") : tr("feature"));
    heatmap_->setRowLabels(t->rows == int64_t(run.tokens.size()) ? run.tokenTexts : QStringList());
    heatmap_->setColumnLabels({});
    heatmap_->setMatrix(t->data, t->rows, t->cols);
    if (range_->currentIndex() == 1) {
        float m = 0;
        for (float v : t->data) m = std::max(m, std::fabs(v));
        heatmap_->setFixedRange(-m, m);
    }
    heatmap_->setSelectedRow(state_->position());
}

void TensorView::showWeight(const QString& name) {
    const auto it = state_->model()->weights.find(name.toStdString());
    const QString shape = it == state_->model()->weights.end()
                              ? QString()
                              : QStringLiteral(" &nbsp;[%1] %2").arg(
                                    [&] {
                                        QStringList s;
                                        for (int64_t d : it->second.shape) s << groupDigits(uint64_t(d));
                                        return s.join(", ");
                                    }(),
                                    it->second.dtype);
    name_->setText(QStringLiteral("<code>%1</code>%2").arg(name, shape));
    if (const auto cached = previews_.find(name); cached != previews_.end()) {
        pendingName_.clear();
        onPreview(cached.value());
        return;
    }
    if (pendingName_ == name) return;  // already asked
    heatmap_->clear(tr("Reading %1\u2026").arg(name));
    pendingName_ = name;
    pendingPreview_ = client_->weightPreview(name, kPreviewRows, kPreviewCols);
}

void TensorView::onPreview(const WeightPreviewPtr& p) {
    if (!p) return;
    previews_.insert(p->name, p);
    if (p->id == pendingPreview_) pendingName_.clear();
    if (!showWeight_ || p->name != shownName()) return;
    heatmap_->setScaleKind(ColorScale::Kind::Diverging);
    const bool vector = p->rows == 1;
    if (range_->currentIndex() == 0) heatmap_->setAutoRange();
    heatmap_->setAxisNames(vector ? tr("row") : tr("out feature"), vector ? tr("feature") : tr("in feature"));
    heatmap_->setRowLabels({});
    heatmap_->setColumnLabels({});
    heatmap_->setMatrix(p->data, p->outRows, p->outCols, p->rowStep, p->colStep);
    if (range_->currentIndex() == 1) {
        float m = 0;
        for (float v : p->data) m = std::max(m, std::fabs(v));
        heatmap_->setFixedRange(-m, m);
    }
    heatmap_->setSelectedRow(-1);
    if (p->rowStep > 1 || p->colStep > 1)
        setReadout(tr("%1 is shown reduced to %2 x %3 cells; each cell is the largest |w| of %4 x %5 weights.")
                       .arg(p->name)
                       .arg(p->outRows)
                       .arg(p->outCols)
                       .arg(p->rowStep)
                       .arg(p->colStep));
}

ViewPage::TensorExport TensorView::tensorExport() const {
    TensorExport e;
    e.name = shownName();
    if (showWeight_) return e;  // the weight lives in the engine: see exportNpy
    if (const TracedTensor* t = state_->traced(e.name)) {
        e.data = t->data;
        e.shape = {t->rows, t->cols};
    }
    return e;
}

void TensorView::exportNpy(const QString& file) {
    if (!showWeight_) {
        ViewPage::exportNpy(file);
        return;
    }
    client_->exportWeight(shownName(), file);
    emit message(tr("Writing %1 to %2\u2026").arg(shownName(), file));
}

}  // namespace strata::ui
