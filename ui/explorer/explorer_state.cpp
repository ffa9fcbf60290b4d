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
    return run_ ? run_->trace.find(name.toStdString()) : nullptr;
}

void ExplorerState::setModel(const ModelSummaryPtr& model) {
    model_ = model;
    run_.reset();
    lens_.reset();
    layer_ = 0;
    position_ = 0;
    emit modelChanged();
    emit runChanged();
    emit lensChanged();
    emit layerChanged(layer_);
    emit positionChanged(position_);
}

void ExplorerState::setRun(const RunResultPtr& run) {
    run_ = run;
    lens_.reset();
    // The last position is where the next token is predicted: the natural place to start.
    position_ = run_ ? std::max(0, int(run_->tokens.size()) - 1) : 0;
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
