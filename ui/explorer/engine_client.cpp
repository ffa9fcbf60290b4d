#include "explorer/engine_client.hpp"

namespace strata::ui {

EngineClient::EngineClient(QObject* parent) : QObject(parent), worker_(new EngineWorker) {
    registerWorkerTypes();
    thread_.setObjectName(QStringLiteral("strata-engine"));
    worker_->moveToThread(&thread_);
    connect(&thread_, &QThread::finished, worker_, &QObject::deleteLater);
    // Signal-to-signal: the worker's results arrive queued on the GUI thread.
    connect(worker_, &EngineWorker::loadProgress, this, &EngineClient::loadProgress);
    connect(worker_, &EngineWorker::modelLoaded, this, &EngineClient::modelLoaded);
    connect(worker_, &EngineWorker::runFinished, this, &EngineClient::runFinished);
    connect(worker_, &EngineWorker::lensFinished, this, &EngineClient::lensFinished);
    connect(worker_, &EngineWorker::nearestFinished, this, &EngineClient::nearestFinished);
    connect(worker_, &EngineWorker::weightPreviewFinished, this, &EngineClient::weightPreviewFinished);
    connect(worker_, &EngineWorker::weightExported, this, &EngineClient::weightExported);
    connect(worker_, &EngineWorker::cancelled, this, &EngineClient::cancelled);
    connect(worker_, &EngineWorker::failed, this, &EngineClient::failed);
    connect(worker_, &EngineWorker::devicesListed, this, &EngineClient::devicesListed);
    connect(worker_, &EngineWorker::compareFinished, this, &EngineClient::compareFinished);
    connect(worker_, &EngineWorker::sweepProgress, this, &EngineClient::sweepProgress);
    connect(worker_, &EngineWorker::sweepFinished, this, &EngineClient::sweepFinished);
    connect(worker_, &EngineWorker::attributionFinished, this, &EngineClient::attributionFinished);
    thread_.start();
}

EngineClient::~EngineClient() {
    worker_->shutdown();  // a streaming reply or a sweep stops at its next check; queued tasks return at once
    thread_.quit();
    thread_.wait();
}

qint64 EngineClient::openModel(const QString& path, const QString& backend) {
    const qint64 id = nextId_++;
    QMetaObject::invokeMethod(worker_, [w = worker_, id, path, backend] { w->openModel(id, path, backend); });
    return id;
}

qint64 EngineClient::openDemo(const QString& backend) {
    const qint64 id = nextId_++;
    QMetaObject::invokeMethod(worker_, [w = worker_, id, backend] { w->openDemo(id, backend); });
    return id;
}

void EngineClient::listDevices() {
    QMetaObject::invokeMethod(worker_, [w = worker_] { w->listDevices(); });
}

qint64 EngineClient::run(const QString& prompt, bool logitLens, const AblationList& ablations) {
    const qint64 id = nextId_++;
    QMetaObject::invokeMethod(worker_, [w = worker_, id, prompt, logitLens, ablations] { w->run(id, prompt, logitLens, ablations); });
    return id;
}

qint64 EngineClient::nearest(int token, int k) {
    const qint64 id = nextId_++;
    QMetaObject::invokeMethod(worker_, [w = worker_, id, token, k] { w->nearest(id, token, k); });
    return id;
}

qint64 EngineClient::weightPreview(const QString& name, int maxRows, int maxCols) {
    const qint64 id = nextId_++;
    QMetaObject::invokeMethod(worker_, [w = worker_, id, name, maxRows, maxCols] { w->weightPreview(id, name, maxRows, maxCols); });
    return id;
}

qint64 EngineClient::exportWeight(const QString& name, const QString& file) {
    const qint64 id = nextId_++;
    QMetaObject::invokeMethod(worker_, [w = worker_, id, name, file] { w->exportWeight(id, name, file); });
    return id;
}

qint64 EngineClient::runTokens(const QString& label, const std::vector<int32_t>& tokens, bool logitLens,
                               const AblationList& ablations) {
    const qint64 id = nextId_++;
    QMetaObject::invokeMethod(worker_, [w = worker_, id, label, tokens, logitLens, ablations] {
        w->runTokens(id, label, tokens, logitLens, ablations);
    });
    return id;
}

qint64 EngineClient::compare(const QString& clean, const QString& corrupt, const AblationList& ablations) {
    const qint64 id = nextId_++;
    QMetaObject::invokeMethod(worker_, [w = worker_, id, clean, corrupt, ablations] { w->compare(id, clean, corrupt, ablations); });
    return id;
}

qint64 EngineClient::patchSweep(const std::vector<int32_t>& clean, const std::vector<int32_t>& corrupt, int answer, int foil,
                                PatchSite site, const AblationList& ablations) {
    const qint64 id = nextId_++;
    QMetaObject::invokeMethod(worker_, [w = worker_, id, clean, corrupt, answer, foil, site, ablations] {
        w->patchSweep(id, clean, corrupt, answer, foil, int(site), ablations);
    });
    return id;
}

qint64 EngineClient::attribute(const std::vector<int32_t>& tokens, int target, int position, const AblationList& ablations) {
    const qint64 id = nextId_++;
    QMetaObject::invokeMethod(worker_, [w = worker_, id, tokens, target, position, ablations] {
        w->attribute(id, tokens, target, position, ablations);
    });
    return id;
}

void EngineClient::cancelAll() { worker_->cancelUpTo(nextId_ - 1); }

}  // namespace strata::ui
