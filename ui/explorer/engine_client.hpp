#pragma once
// The GUI side of the engine worker: starts the worker's QThread, numbers requests, forwards them as queued
// calls and the worker's results as signals. Nothing here blocks the GUI thread (only the destructor joins the
// thread, after cancelling whatever runs).
#include <QObject>
#include <QThread>

#include "worker/engine_worker.hpp"

namespace strata::ui {

class EngineClient : public QObject {
    Q_OBJECT
public:
    explicit EngineClient(QObject* parent = nullptr);
    ~EngineClient() override;

    qint64 openModel(const QString& path, const QString& backend);
    qint64 openDemo(const QString& backend);
    // Asks the worker for the Vulkan devices; devicesListed answers.
    void listDevices();
    qint64 run(const QString& prompt, bool logitLens, const AblationList& ablations = {});
    qint64 nearest(int token, int k);
    qint64 weightPreview(const QString& name, int maxRows, int maxCols);
    qint64 exportWeight(const QString& name, const QString& file);
    // Cancels every request made so far (running or queued).
    void cancelAll();
    qint64 lastId() const { return nextId_ - 1; }
    // As run(), over exactly `tokens` (the chat opens a conversation in the explorer this way).
    qint64 runTokens(const QString& label, const std::vector<int32_t>& tokens, bool logitLens,
                     const AblationList& ablations = {});
    // Causal tools (engine_worker.hpp): compareFinished, sweepProgress / sweepFinished, attributionFinished.
    qint64 compare(const QString& clean, const QString& corrupt, const AblationList& ablations);
    qint64 patchSweep(const std::vector<int32_t>& clean, const std::vector<int32_t>& corrupt, int answer, int foil,
                      PatchSite site, const AblationList& ablations);
    qint64 attribute(const std::vector<int32_t>& tokens, int target, int position, const AblationList& ablations);
    // Cancels one request (and, as the worker's cancel does, every older one).
    void cancelUpTo(qint64 id) { worker_->cancelUpTo(id); }
    // For the chat and the logits explorer, which call the worker's slots and connect to its signals directly:
    // a request id from the same sequence as the calls above (so cancelAll covers it), and the worker.
    qint64 newId() { return nextId_++; }
    EngineWorker* worker() const { return worker_; }

signals:
    void loadProgress(qint64 id, const strata::ui::LoadStatus& status);
    void modelLoaded(qint64 id, const strata::ui::ModelSummaryPtr& summary);
    void runFinished(const strata::ui::RunResultPtr& result);
    void lensFinished(const strata::ui::LensResultPtr& result);
    void nearestFinished(const strata::ui::NearestResultPtr& result);
    void weightPreviewFinished(const strata::ui::WeightPreviewPtr& preview);
    void weightExported(qint64 id, const QString& file);
    void cancelled(qint64 id, const QString& what);
    void failed(qint64 id, const QString& what, const QString& message);
    void devicesListed(const QStringList& devices, int chosen, const QString& problem);
    void compareFinished(const strata::ui::CompareResultPtr& result);
    void sweepProgress(qint64 id, qint64 done, qint64 total);
    void sweepFinished(const strata::ui::SweepResultPtr& result);
    void attributionFinished(const strata::ui::AttributionResultPtr& result);

private:
    QThread thread_;
    EngineWorker* worker_;  // lives on thread_, deleted when it finishes
    qint64 nextId_ = 1;
};

}  // namespace strata::ui
