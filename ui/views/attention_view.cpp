#include "views/attention_view.hpp"

#include <algorithm>
#include <cmath>

#include <QContextMenuEvent>
#include <QLabel>
#include <QMenu>
#include <QMouseEvent>
#include <QToolButton>
#include <QPainter>
#include <QSpinBox>
#include <QSplitter>

#include "explorer/intervention_bar.hpp"
#include "worker/analysis.hpp"
#include "views/colormap.hpp"
#include "worker/engine_worker.hpp"
#include "views/heatmap_widget.hpp"
#include "views/plot_util.hpp"

namespace strata::ui {

AttentionView::AttentionView(ExplorerState* state, EngineClient* client, QWidget* parent)
    : ViewPage(tr("Attention"), state, client, parent) {
    headBox_ = new QSpinBox;
    headBox_->setPrefix(tr("head "));
    headBox_->setRange(0, 0);
    ablate_ = new QToolButton;
    ablate_->setObjectName(QStringLiteral("ablateHead"));
    ablate_->setText(tr("Ablate head"));
    ablate_->setToolTip(tr("Ablate the selected head (its columns of softmax(scores) @ values, before wo); right-click "
                           "any head for the same"));
    ablate_->setPopupMode(QToolButton::InstantPopup);
    auto* ablateMenu = new QMenu(ablate_);
    ablate_->setMenu(ablateMenu);
    connect(ablateMenu, &QMenu::aboutToShow, this, [this, ablateMenu] {
        ablateMenu->clear();
        fillHeadMenu(ablateMenu, head_);
    });
    strongestButton_ = new QToolButton;
    strongestButton_->setObjectName(QStringLiteral("strongestInduction"));
    strongestButton_->setToolButtonStyle(Qt::ToolButtonTextOnly);
    strongestButton_->setAutoRaise(true);
    strongestButton_->setToolTip(
        tr("Prefix matching: for each query whose token occurred earlier in the prompt, the attention it puts on "
           "the token that came after that earlier occurrence, averaged over such queries. An induction head "
           "(it looks back to what followed the last time and predicts it again) scores near 1. Click to go to "
           "the strongest head of the whole model."));
    connect(strongestButton_, &QToolButton::clicked, this, [this] {
        if (strongest_.first < 0) return;
        state_->setLayer(strongest_.first);
        setHead(strongest_.second);
    });
    controls()->addWidget(strongestButton_);
    controls()->addStretch(1);
    controls()->addWidget(headBox_);
    controls()->addWidget(ablate_);

    grid_ = new HeadGrid;
    map_ = new HeatmapWidget;
    map_->setScaleKind(ColorScale::Kind::Sequential);
    map_->setFixedRange(0.0f, 1.0f);
    map_->setAxisNames(tr("query"), tr("key"));
    auto* split = new QSplitter(Qt::Horizontal);
    split->addWidget(grid_);
    split->addWidget(map_);
    split->setStretchFactor(0, 2);
    split->setStretchFactor(1, 3);
    setCanvas(split);
    setReadout(tr("Rows are queries, columns the keys they attend to; each row sums to 1."));

    connect(headBox_, &QSpinBox::valueChanged, this, &AttentionView::setHead);
    connect(grid_, &HeadGrid::headClicked, this, &AttentionView::setHead);
    auto readout = [this](const QString& s) {
        if (!s.isEmpty()) setReadout(s);
    };
    connect(grid_, &HeadGrid::hoverChanged, this, readout);
    connect(map_, &HeatmapWidget::hoverChanged, this, [this](const QString& s) {
        if (!s.isEmpty()) setReadout(tr("layers.%1 head %2 \u00b7 %3").arg(state_->layer()).arg(head_).arg(s));
    });
    connect(map_, &HeatmapWidget::rowClicked, state_, &ExplorerState::setPosition);
    connect(grid_, &HeadGrid::headMenuRequested, this, &AttentionView::showHeadMenu);
    map_->setContextMenuPolicy(Qt::CustomContextMenu);
    connect(map_, &QWidget::customContextMenuRequested, this, [this](const QPoint& p) { showHeadMenu(head_, map_->mapToGlobal(p)); });
    connect(state_, &ExplorerState::ablationsChanged, this, &AttentionView::refresh);
    connect(state_, &ExplorerState::runChanged, this, &AttentionView::refresh);
    connect(state_, &ExplorerState::layerChanged, this, &AttentionView::refresh);
    connect(state_, &ExplorerState::positionChanged, this, [this](int p) {
        map_->setSelectedRow(p);
        grid_->setSelected(head_, p);
    });
}

void AttentionView::setHead(int head) {
    const int n = state_->model() ? int(state_->model()->config.n_heads) : 1;
    head = std::clamp(head, 0, std::max(0, n - 1));
    if (head == head_ && headBox_->value() == head) return;
    head_ = head;
    const QSignalBlocker block(headBox_);
    headBox_->setValue(head);
    refresh();
    emit headChanged(head);
}

bool AttentionView::hasContent() const { return map_->rows() > 0; }

QString AttentionView::headSpec(int head) const { return QStringLiteral("layers.%1.attention.heads.%2").arg(state_->layer()).arg(head); }

void AttentionView::fillHeadMenu(QMenu* menu, int head) {
    if (!state_->run()) {
        menu->addAction(tr("Run a prompt first"))->setEnabled(false);
        return;
    }
    addAblationActions(menu, state_, headSpec(head), tr("head %1 of layers.%2").arg(head).arg(state_->layer()));
}

void AttentionView::showHeadMenu(int head, const QPoint& global) {
    if (head < 0) return;
    setHead(head);
    QMenu menu;
    fillHeadMenu(&menu, head);
    menu.exec(global);
}

void AttentionView::refresh() {
    const QString name = QStringLiteral("layers.%1.attention.probs").arg(state_->layer());
    const TracedTensor* t = state_->traced(name);
    const RunResultPtr& run = state_->run();
    scoreInduction();
    if (!t || !run) {
        const QString why = !run ? tr("Run a prompt to see attention.")
                                 : tr("Attention probabilities are kept for prompts of up to %1 tokens.").arg(EngineWorker::kMaxProbsPositions);
        grid_->clear(why);
        map_->clear(why);
        return;
    }
    const ModelConfig& c = state_->model()->config;
    const int heads = int(c.n_heads), T = int(run->tokens.size()), S = int(t->cols);
    headBox_->setRange(0, heads - 1);
    // Diff mode: probabilities minus the clean run's, on a diverging scale around 0.
    const bool diff = state_->showingDiff();
    float m = 0.0f;
    if (diff)
        for (float v : t->data) m = std::max(m, std::fabs(v));
    m = std::max(m, 1e-6f);
    grid_->setDiverging(diff, m);
    std::vector<bool> marked(size_t(heads), false);
    for (int h = 0; h < heads; ++h) marked[size_t(h)] = state_->isAblated(headSpec(h));
    grid_->setMarked(marked);
    if (diff) {
        map_->setScaleKind(ColorScale::Kind::Diverging);
        map_->setFixedRange(-m, m);
        setReadout(tr("Diff: the ablated pass's probabilities minus the clean pass's; each row sums to 0."));
    } else {
        map_->setScaleKind(ColorScale::Kind::Sequential);
        map_->setFixedRange(0.0f, 1.0f);
        setReadout(tr("Rows are queries, columns the keys they attend to; each row sums to 1."));
    }
    grid_->setData(t->data.data(), heads, T, S, int(c.n_rep()), run->tokenTexts);
    const int layer = state_->layer();
    if (layer >= 0 && layer < int(induction_.size()) && !diff)
        grid_->setScores(induction_[size_t(layer)], strongest_.first == layer ? strongest_.second : -1);
    else
        grid_->setScores({}, -1);
    grid_->setSelected(head_, state_->position());
    std::vector<float> one(t->data.begin() + std::ptrdiff_t(size_t(head_) * T * S), t->data.begin() + std::ptrdiff_t(size_t(head_ + 1) * T * S));
    map_->setRowLabels(run->tokenTexts);
    map_->setColumnLabels(run->tokenTexts);
    map_->setMatrix(std::move(one), T, S);
    map_->setSelectedRow(state_->position());
}

void AttentionView::scoreInduction() {
    // Once per run: every layer's probabilities as traced (the run's own pass, not diff mode's difference).
    const RunResultPtr& run = state_->run();
    if (run && run == scoredRun_.lock()) return;
    scoredRun_ = run;
    // Every layer or none: a layer without kept probabilities, or a prompt that repeats nothing, leaves no scores.
    std::vector<std::vector<float>> scores;
    std::pair<int, int> strongest{-1, -1};
    float best = -1.0f;
    if (run && state_->model()) {
        const ModelConfig& c = state_->model()->config;
        const int64_t T = int64_t(run->tokens.size());
        for (int64_t l = 0; l < c.n_layers; ++l) {
            const TracedTensor* p = run->trace.find("layers." + std::to_string(l) + ".attention.probs");
            if (!p || p->rows != c.n_heads * T) break;
            analysis::PrefixMatching pm = analysis::prefix_matching(p->data, c.n_heads, T, p->cols, run->tokens);
            if (pm.queries == 0) break;
            for (int64_t h = 0; h < c.n_heads; ++h)
                if (pm.score[size_t(h)] > best) best = pm.score[size_t(h)], strongest = {int(l), int(h)};
            scores.push_back(std::move(pm.score));
        }
        if (int64_t(scores.size()) != c.n_layers) scores.clear(), strongest = {-1, -1};
    }
    induction_ = std::move(scores);
    strongest_ = strongest;
    if (strongest_.first >= 0) {
        strongestButton_->setText(tr("strongest induction head: layers.%1 h%2 \u00b7 %3")
                                      .arg(strongest_.first)
                                      .arg(strongest_.second)
                                      .arg(double(best), 0, 'f', 2));
        strongestButton_->setEnabled(true);
    } else {
        strongestButton_->setText(run && run->hasProbs ? tr("induction: the prompt repeats no token") : QString());
        strongestButton_->setEnabled(false);
    }
    strongestButton_->setVisible(!strongestButton_->text().isEmpty());
    if (run && std::exchange(followStrongest_, false) && strongest_.first >= 0)
        QMetaObject::invokeMethod(strongestButton_, &QToolButton::click, Qt::QueuedConnection);
}

ViewPage::TensorExport AttentionView::tensorExport() const {
    TensorExport e;
    e.name = QStringLiteral("layers.%1.attention.probs").arg(state_->layer());
    if (const TracedTensor* t = state_->traced(e.name)) {
        const int64_t heads = state_->model()->config.n_heads;
        e.data = t->data;
        e.shape = {heads, t->rows / heads, t->cols};  // [n_heads, T, T0 + T]
    }
    return e;
}

// ---------------------------------------------------------------------------------------------- head grid

HeadGrid::HeadGrid(QWidget* parent) : QWidget(parent) {
    setMouseTracking(true);
    message_ = tr("no data");
}

void HeadGrid::setData(const float* probs, int heads, int T, int S, int kvGroup, QStringList tokens) {
    probs_.assign(probs, probs + size_t(heads) * T * S);
    heads_ = heads;
    T_ = T;
    S_ = S;
    kvGroup_ = std::max(1, kvGroup);
    tokens_ = std::move(tokens);
    message_.clear();
    rebuild();
}

void HeadGrid::clear(const QString& message) {
    probs_.clear();
    heads_ = 0;
    images_.clear();
    message_ = message;
    update();
}

void HeadGrid::setSelected(int head, int position) {
    selected_ = head;
    position_ = position;
    update();
}

void HeadGrid::resizeEvent(QResizeEvent*) { update(); }

void HeadGrid::setDiverging(bool on, float range) {
    diverging_ = on;
    range_ = range;
}

void HeadGrid::setMarked(const std::vector<bool>& marked) {
    marked_ = marked;
    update();
}

void HeadGrid::setScores(std::vector<float> scores, int best) {
    scores_ = std::move(scores);
    best_ = best;
    update();
}

void HeadGrid::contextMenuEvent(QContextMenuEvent* e) {
    const int h = headAt(e->pos());
    if (h >= 0) emit headMenuRequested(h, e->globalPos());
}

void HeadGrid::rebuild() {
    // One small image per head, T x S pixels, scaled when painted.
    images_.clear();
    for (int h = 0; h < heads_; ++h) {
        QImage img(std::max(1, S_), std::max(1, T_), QImage::Format_RGB32);
        for (int t = 0; t < T_; ++t) {
            QRgb* line = reinterpret_cast<QRgb*>(img.scanLine(t));
            const float* row = probs_.data() + (size_t(h) * T_ + t) * S_;
            for (int s = 0; s < S_; ++s) line[s] = diverging_ ? divergingColor(row[s] / range_) : sequentialColor(row[s]);
        }
        images_.push_back(std::move(img));
    }
    update();
}

QRect HeadGrid::cellRect(int head) const {
    const int cols = std::max(1, int(std::ceil(std::sqrt(double(heads_) * width() / std::max(1, height())))));
    const int rows = std::max(1, (heads_ + cols - 1) / cols);
    const QFontMetrics fm(font());
    const int cw = width() / cols, ch = height() / rows;
    const int side = std::max(4, std::min(cw, ch - fm.height()) - 6);
    const int c = head % cols, r = head / cols;
    return QRect(c * cw + (cw - side) / 2, r * ch + fm.height(), side, side);
}

int HeadGrid::headAt(QPoint p) const {
    for (int h = 0; h < heads_; ++h)
        if (cellRect(h).adjusted(-3, -3, 3, 3).contains(p)) return h;
    return -1;
}

void HeadGrid::paintEvent(QPaintEvent*) {
    QPainter g(this);
    g.fillRect(rect(), palette().base());
    if (heads_ == 0) {
        g.setPen(palette().color(QPalette::PlaceholderText));
        g.drawText(rect().adjusted(8, 8, -8, -8), Qt::AlignCenter | Qt::TextWordWrap, message_);
        return;
    }
    const QFontMetrics fm(font());
    for (int h = 0; h < heads_; ++h) {
        const QRect r = cellRect(h);
        g.drawImage(r, images_[size_t(h)]);
        g.setPen(h == selected_ ? QPen(QColor(0xe0, 0x1b, 0x24), 2) : QPen(palette().color(QPalette::Mid), 1));
        g.setBrush(Qt::NoBrush);
        g.drawRect(r.adjusted(-1, -1, 0, 0));
        if (h == best_) {
            // The strongest induction head of the model: a dashed outline outside the first.
            g.setPen(QPen(QColor(0x26, 0xa2, 0x69), 2, Qt::DashLine));
            g.drawRect(r.adjusted(-4, -4, 3, 3));
        }
        g.setPen(palette().color(QPalette::Text));
        // With scores the label is compact, so the thumbnail's width holds it: "h3 kv0 · 0.17".
        const QString label = h < int(scores_.size())
                                  ? tr("h%1 kv%2 \u00b7 %3").arg(h).arg(h / kvGroup_).arg(double(scores_[size_t(h)]), 0, 'f', 2)
                                  : tr("h%1 \u00b7 kv %2").arg(h).arg(h / kvGroup_);
        g.drawText(QRect(r.left(), r.top() - fm.height(), r.width(), fm.height()), Qt::AlignLeft | Qt::AlignBottom,
                   fm.elidedText(label, Qt::ElideRight, r.width()));
        if (h < int(marked_.size()) && marked_[size_t(h)]) {
            // Ablated: a cross over the pattern it still computes (the head's output is what is removed).
            g.setPen(QPen(QColor(0xc0, 0x1c, 0x28, 200), 2));
            g.drawLine(r.topLeft(), r.bottomRight());
            g.drawLine(r.topRight(), r.bottomLeft());
        }
        if (h == selected_ && position_ >= 0 && position_ < T_) {
            const double y = r.top() + (position_ + 0.5) * double(r.height()) / T_;
            g.setPen(QPen(QColor(0xe0, 0x1b, 0x24, 160), 1));
            g.drawLine(QPointF(r.left() - 4, y), QPointF(r.left() - 1, y));
        }
    }
}

void HeadGrid::mouseMoveEvent(QMouseEvent* e) {
    const QPoint p = e->position().toPoint();
    const int h = headAt(p);
    if (h < 0) return;
    const QRect r = cellRect(h);
    const int t = std::clamp(int((p.y() - r.top()) * double(T_) / r.height()), 0, T_ - 1);
    const int s = std::clamp(int((p.x() - r.left()) * double(S_) / r.width()), 0, S_ - 1);
    emit hoverChanged(tr("head %1 (kv head %2) \u00b7 query %3 \u2018%4\u2019 \u2192 key %5 \u2018%6\u2019 \u00b7 p = %7")
                          .arg(h)
                          .arg(h / kvGroup_)
                          .arg(t)
                          .arg(tokens_.value(t))
                          .arg(s)
                          .arg(tokens_.value(s), formatValue(probs_[(size_t(h) * T_ + t) * S_ + s])) +
                      (h < int(scores_.size()) ? tr(" \u00b7 prefix matching (induction) %1").arg(double(scores_[size_t(h)]), 0, 'f', 3)
                                               : QString()));
}

void HeadGrid::mousePressEvent(QMouseEvent* e) {
    const int h = headAt(e->position().toPoint());
    if (h >= 0) emit headClicked(h);
}

}  // namespace strata::ui
