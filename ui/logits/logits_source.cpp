#include "logits/logits_source.hpp"

#include <algorithm>

#include <QTimer>

#include "explorer/engine_client.hpp"

namespace strata::ui {

LogitsSource::LogitsSource(ExplorerState* state, EngineClient* engine, QObject* parent)
    : QObject(parent), state_(state), engine_(engine) {
    registerChatTypes();
    connect(state_, &ExplorerState::runChanged, this, &LogitsSource::schedule);
    connect(state_, &ExplorerState::positionChanged, this, &LogitsSource::schedule);
    connect(state_, &ExplorerState::modelChanged, this, &LogitsSource::schedule);
    EngineWorker* w = engine_->worker();
    connect(w, &EngineWorker::positionLogitsFinished, this, [this](const PositionLogitsPtr& r) {
        if (r->id == logitsId_) {
            logitsId_ = 0;
            if (matches(r)) logits_ = r;
            else schedule();  // the selection moved on while this was computed
            emit logitsChanged();
            emit busyChanged();
        } else if (r->id == lensId_) {
            lensId_ = 0;
            if (matches(r)) {
                lens_ = r;
                logits_ = r;
            }
            emit lensChanged();
            emit logitsChanged();
            emit busyChanged();
        }
    });
    auto stopped = [this](qint64 id, const QString& why) {
        if (id != logitsId_ && id != lensId_) return;
        if (id == logitsId_) logitsId_ = 0;
        if (id == lensId_) lensId_ = 0;
        error_ = why;
        emit logitsChanged();
        emit lensChanged();
        emit busyChanged();
    };
    connect(w, &EngineWorker::failed, this, [stopped](qint64 id, const QString& what, const QString& message) {
        stopped(id, what + QStringLiteral(": ") + message);
    });
    connect(w, &EngineWorker::cancelled, this, [stopped](qint64 id, const QString& what) { stopped(id, tr("cancelled: %1").arg(what)); });
}

int LogitsSource::position() const {
    const RunResultPtr& run = state_->run();
    if (!run || run->tokens.empty()) return 0;
    return std::clamp(state_->position(), 0, int(run->tokens.size()) - 1);
}

int32_t LogitsSource::tokenAt(int p) const {
    const RunResultPtr& run = state_->run();
    if (!run || p < 0 || p >= int(run->tokens.size())) return -1;
    return run->tokens[size_t(p)];
}

int32_t LogitsSource::actualNext() const { return tokenAt(position() + 1); }

bool LogitsSource::matches(const PositionLogitsPtr& r) const {
    const RunResultPtr& run = state_->run();
    return r && run && r->runId == run->id && r->position == position();
}

void LogitsSource::setActive(QObject* view, bool shown) {
    shown_.removeAll(view);
    if (shown) shown_ << view;
    if (shown) schedule();
}

void LogitsSource::schedule() {
    if (scheduled_) return;
    scheduled_ = true;
    // Setting a run and then a position arrive together: ask once, for where the selection settles.
    QTimer::singleShot(0, this, [this] {
        scheduled_ = false;
        request();
    });
}

void LogitsSource::request() {
    const RunResultPtr& run = state_->run();
    if (!matches(logits_)) {
        logits_.reset();
        emit logitsChanged();
    }
    if (!matches(lens_)) {
        lens_.reset();
        emit lensChanged();
    }
    // A request under way for an older selection is answered first; its reply asks again.
    if (!run || shown_.isEmpty() || logits_ || logitsId_ != 0) return;
    error_.clear();
    logitsId_ = engine_->newId();
    EngineWorker* w = engine_->worker();
    const int p = position();
    QMetaObject::invokeMethod(w, [w, id = logitsId_, run, p] { w->positionLogits(id, run, p, false); });
    emit busyChanged();
}

void LogitsSource::requestLens() {
    const RunResultPtr& run = state_->run();
    if (!run || lensId_ != 0 || matches(lens_)) return;
    error_.clear();
    lensId_ = engine_->newId();
    EngineWorker* w = engine_->worker();
    const int p = position();
    QMetaObject::invokeMethod(w, [w, id = lensId_, run, p] { w->positionLogits(id, run, p, true); });
    emit busyChanged();
}

}  // namespace strata::ui
