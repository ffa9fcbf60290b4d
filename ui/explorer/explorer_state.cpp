#include "explorer/explorer_state.hpp"

#include <algorithm>

namespace strata::ui {

ExplorerState::ExplorerState(QObject* parent) : QObject(parent) {}

int ExplorerState::layers() const { return model_ ? int(model_->config.n_layers) : 0; }

int ExplorerState::positions() const { return run_ ? int(run_->tokens.size()) : 0; }

QString ExplorerState::resolve(const QString& pattern) const {
    QString s = pattern;
    return s.replace(QStringLiteral("{N}"), QString::number(layer_));
}

const TracedTensor* ExplorerState::traced(const QString& name) const {
    if (!run_) return nullptr;
    const std::string key = name.toStdString();
    const TracedTensor* t = run_->trace.find(key);
    if (!t || !showingDiff()) return t;
    if (const auto it = diffs_.find(key); it != diffs_.end()) return &it->second;
    const TracedTensor* c = run_->clean->trace.find(key);
    if (!c || c->rows != t->rows || c->cols != t->cols) return nullptr;  // nothing to subtract
    TracedTensor d;
    d.name = t->name;
    d.rows = t->rows;
    d.cols = t->cols;
    d.data.resize(t->data.size());  // [rows, cols]
    for (size_t i = 0; i < d.data.size(); ++i) d.data[i] = t->data[i] - c->data[i];
    return &diffs_.emplace(key, std::move(d)).first->second;
}

void ExplorerState::setAblations(const AblationList& ablations) {
    if (ablations == ablations_) return;
    ablations_ = ablations;
    emit ablationsChanged();
}

void ExplorerState::addAblation(const AblationSpec& ablation) {
    AblationList next;
    for (const AblationSpec& a : ablations_)
        if (a.spec != ablation.spec) next.push_back(a);
    next.push_back(ablation);
    setAblations(next);
}

void ExplorerState::removeAblation(const QString& spec) {
    AblationList next;
    for (const AblationSpec& a : ablations_)
        if (a.spec != spec) next.push_back(a);
    setAblations(next);
}

bool ExplorerState::isAblated(const QString& spec) const {
    return std::any_of(ablations_.begin(), ablations_.end(), [&](const AblationSpec& a) { return a.spec == spec; });
}

void ExplorerState::setDiff(bool on) {
    if (on == diff_) return;
    diff_ = on;
    emit diffChanged(on);
    emit runChanged();  // every view redraws from traced()
}

void ExplorerState::setModel(const ModelSummaryPtr& model) {
    model_ = model;
    run_.reset();
    diffs_.clear();
    const bool hadAblations = !ablations_.empty();
    ablations_.clear();  // specs name layers and heads of the old model
    lens_.reset();
    layer_ = 0;
    position_ = 0;
    emit modelChanged();
    if (hadAblations) emit ablationsChanged();
    emit runChanged();
    emit lensChanged();
    emit layerChanged(layer_);
    emit positionChanged(position_);
}

void ExplorerState::setRun(const RunResultPtr& run) {
    // The same tokens again (an ablation added or removed): stay where the person was looking.
    const bool sameTokens = run_ && run && run_->tokens == run->tokens;
    run_ = run;
    diffs_.clear();
    lens_.reset();
    // Else the last position, where the next token is predicted: the natural place to start.
    if (!sameTokens) position_ = run_ ? std::max(0, int(run_->tokens.size()) - 1) : 0;
    emit runChanged();
    emit lensChanged();
    emit positionChanged(position_);
}

void ExplorerState::setLens(const LensResultPtr& lens) {
    if (lens && run_ && lens->runId != run_->id) return;  // a lens for an older run
    lens_ = lens;
    emit lensChanged();
}

void ExplorerState::setLayer(int layer) {
    layer = std::clamp(layer, 0, std::max(0, layers() - 1));
    if (layer == layer_) return;
    layer_ = layer;
    emit layerChanged(layer_);
}

void ExplorerState::setPosition(int position) {
    position = std::clamp(position, 0, std::max(0, positions() - 1));
    if (position == position_) return;
    position_ = position;
    emit positionChanged(position_);
}

void ExplorerState::setPart(const Part& part) {
    if (part.key == part_.key && part.tensor == part_.tensor) return;
    part_ = part;
    emit partChanged();
}

}  // namespace strata::ui
