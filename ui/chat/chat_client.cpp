#include "chat/chat_client.hpp"

#include "explorer/engine_client.hpp"

namespace strata::ui {

ChatClient::ChatClient(EngineClient* engine, QObject* parent) : QObject(parent), engine_(engine) {
    registerChatTypes();
    EngineWorker* w = engine_->worker();
    // The worker lives on its own thread: these arrive queued, in the order they were sent.
    connect(w, &EngineWorker::chatStarted, this, [this](qint64 id, const ChatStartPtr& s) {
        if (id == id_) emit started(s);
    });
    connect(w, &EngineWorker::chatToken, this, [this](qint64 id, const ChatTokenPtr& t) {
        if (id == id_) emit token(t);
    });
    connect(w, &EngineWorker::chatFinished, this, [this](qint64 id, const ChatOutcomePtr& o) {
        if (id != id_) return;
        id_ = 0;
        stop_.reset();
        emit finished(o);
    });
}

qint64 ChatClient::generate(ChatRequest request) {
    stop();
    stop_ = request.stop;
    id_ = engine_->newId();
    auto shared = std::make_shared<const ChatRequest>(std::move(request));
    EngineWorker* w = engine_->worker();
    QMetaObject::invokeMethod(w, [w, id = id_, shared] { w->chatGenerate(id, shared); });
    return id_;
}

void ChatClient::stop() {
    if (stop_) stop_->store(true);
}

}  // namespace strata::ui
