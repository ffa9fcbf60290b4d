// EngineWorker's chat and logits-explorer slots (declared in worker/engine_worker.hpp). They live here, beside the
// chat and the lens they drive, so that the worker's own file stays about loading models and running prompts.
#include "chat/chat_engine.hpp"
#include "logits/lens.hpp"
#include "strata/error.hpp"
#include "strata/model.hpp"
#include "worker/engine_worker.hpp"

namespace strata::ui {

ChatEngine& EngineWorker::chatEngine() {
    if (!chat_) chat_ = std::make_unique<ChatEngine>(*model_, *backend_);
    return *chat_;
}

void EngineWorker::chatGenerate(qint64 id, const ChatRequestPtr& request) {
    if (!model_ || !backend_) {
        auto outcome = std::make_shared<ChatOutcome>();
        outcome->error = tr("No model is open.");
        emit chatFinished(id, outcome);
        return;
    }
    {
        // shutdown() stops this reply through its own flag, also when it arrives before the reply starts.
        const std::lock_guard<std::mutex> lock(chatStopMutex_);
        chatStop_ = request->stop;
        if (shutdown_.load()) chatStop_->store(true);
    }
    ChatEngine::Callbacks callbacks;
    callbacks.started = [&](const ChatStart& s) { emit chatStarted(id, std::make_shared<const ChatStart>(s)); };
    callbacks.token = [&](const ChatToken& t) { emit chatToken(id, std::make_shared<const ChatToken>(t)); };
    const ChatOutcome outcome = chatEngine().generate(*request, callbacks);
    {
        const std::lock_guard<std::mutex> lock(chatStopMutex_);
        chatStop_.reset();
    }
    emit chatFinished(id, std::make_shared<const ChatOutcome>(outcome));
}

void EngineWorker::positionLogits(qint64 id, const RunResultPtr& run, int position, bool withLens) {
    beginTask(id);
    const QString what = withLens ? tr("computing the logit lens at position %1").arg(position)
                                  : tr("reading the logits at position %1").arg(position);
    if (!model_ || !run) {
        emit failed(id, what, tr("no model is open"));
        return;
    }
    try {
        auto r = std::make_shared<PositionLogits>();
        r->id = id;
        r->runId = run->id;
        r->position = position;
        r->logits = lens::logits_at(*model_, run->trace, position, &abort_);
        if (withLens) {
            r->lens = lens::logit_lens(*transformer_, run->trace, position);
            r->lensRows = model_->config.n_layers + 1;
        }
        r->vocab = chatEngine().vocabulary();
        emit positionLogitsFinished(r);
    } catch (const Cancelled&) {
        emit cancelled(id, what);
    } catch (const std::exception& e) {
        emit failed(id, what, QString::fromUtf8(e.what()));
    }
}

}  // namespace strata::ui
