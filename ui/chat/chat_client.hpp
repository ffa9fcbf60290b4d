#pragma once
// The chat's line to the engine worker: sends one reply request at a time to EngineWorker::chatGenerate (queued
// on the worker's thread) and passes on that request's started / token / finished signals. Stop sets the
// request's own flag, which the worker checks between tokens; the GUI never waits.
#include <atomic>
#include <memory>

#include <QObject>

#include "chat/chat_types.hpp"

namespace strata::ui {

class EngineClient;

class ChatClient : public QObject {
    Q_OBJECT
public:
    explicit ChatClient(EngineClient* engine, QObject* parent = nullptr);

    // Starts a reply (a running one is stopped first; its late signals are ignored). Returns the request id.
    qint64 generate(ChatRequest request);
    void stop();
    bool running() const { return id_ != 0; }
    qint64 currentId() const { return id_; }

signals:
    void started(const strata::ui::ChatStartPtr& start);
    void token(const strata::ui::ChatTokenPtr& token);
    void finished(const strata::ui::ChatOutcomePtr& outcome);

private:
    EngineClient* engine_;
    qint64 id_ = 0;
    std::shared_ptr<std::atomic<bool>> stop_;
};

}  // namespace strata::ui
