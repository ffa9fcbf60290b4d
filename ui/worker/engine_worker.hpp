#pragma once
// The engine's home: a worker object that lives on its own QThread (the Qt worker-object pattern) and owns the
// model, the backend and the transformer. The GUI talks to it only through queued slots and receives value
// types by signal, so it never waits on the engine. Long tasks poll an abort flag between steps.
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include <QObject>
#include <QString>
#include <QStringList>

#include "chat/chat_types.hpp"
#include "worker/worker_types.hpp"

namespace strata {
class Model;
class Backend;
class Transformer;
struct BackendInfo;
}  // namespace strata

namespace strata::ui {

class ChatEngine;

class EngineWorker : public QObject {
    Q_OBJECT
public:
    EngineWorker();
    ~EngineWorker() override;

    // Thread-safe (called from the GUI thread): cancels every task with an id <= id, running or queued.
    void cancelUpTo(qint64 id);
    // Thread-safe: the window is closing. Every long job stops at its next check (a streaming reply between two
    // tokens, a prefill between layers, a device wait within its slice) and every queued one returns at once, so
    // the thread can be joined without waiting for work nobody will see.
    void shutdown();

    // Where the demonstration model lives: $STRATA_CACHE_DIR/demo when that is set, else demo/ in the user's data
    // folder (QStandardPaths::AppDataLocation, ~/.local/share/strata/strata/demo).
    static QString cacheDir();
    static QString demoDir();
    // The Llama 3 tokenizer the demonstration model is made with: the first that exists of
    // $STRATA_CACHE_DIR/tokenizer/tokenizer.json, ~/.cache/strata/tokenizer/tokenizer.json (scripts/setup),
    // <prefix>/share/strata/tokenizer.json beside the executable, and strata/tokenizer.json in the system data
    // folders (/usr/share/strata/tokenizer.json, from the package). tokenizerCandidates() lists them in order.
    static QString cachedTokenizer();
    static QStringList tokenizerCandidates();

    // What the window needs to know about a loaded model (also used by the tests).
    static ModelSummaryPtr summarize(const Model& model, const BackendInfo& backend, const QString& backendNote);

    // Thread-safe: a run's trace, logit lens and buffers may take at most this many bytes of each memory (0, the
    // default: what the host and the backend have available). A run beyond it is refused before anything is
    // allocated, saying how much it needs and what to change; the tests set a small limit to see that.
    void setMemoryLimit(uint64_t bytes) { memoryLimit_.store(bytes); }

    // Prompts longer than this keep no attention probabilities (they are T x T per head).
    static constexpr int64_t kMaxProbsPositions = 256;
    static constexpr int64_t kTopK = 20;
    // The kept trace stays under this many bytes (long prompts on big models keep fewer tensors).
    static constexpr int64_t kTraceBudgetBytes = int64_t(2) << 30;
    // The full logits rows [T, vocab] are kept while they hold at most this many floats (the logits explorer
    // reads them); past that a run keeps each position's top-k and statistics, computed piece by piece.
    static constexpr int64_t kKeptLogitsFloats = int64_t(16) << 20;
    // What a run keeps for a T-token prompt: everything the views need, within the budget.
    static TraceRequest explorerRequest(const ModelConfig& config, int64_t T);

public slots:
    // Lists the Vulkan devices (devicesListed); never fails: no device is an empty list and a reason.
    void listDevices();
    // Loads a folder or .gguf on the named backend ("cpu", "vulkan" or "vulkan:N" for device N; a failing vulkan
    // falls back to cpu, with a note saying why).
    void openModel(qint64 id, const QString& path, const QString& backend);
    // Opens the demonstration model, writing it first (from the cached tokenizer) when it is missing.
    void openDemo(qint64 id, const QString& backend);
    // Prefills <|begin_of_text|> + the prompt, keeping the whole trace; then, when asked, the logit lens.
    // With ablations the result is the intervened pass, and carries the plain pass as RunResult::clean.
    void run(qint64 id, const QString& prompt, bool logitLens, const strata::ui::AblationList& ablations = {});
    // The row of tok_embeddings of `token` and its k nearest tokens by cosine.
    void nearest(qint64 id, int token, int k);
    // A weight reduced for display (at most maxRows x maxCols cells).
    void weightPreview(qint64 id, const QString& name, int maxRows, int maxCols);
    // Writes a whole weight as float32 .npy.
    void exportWeight(qint64 id, const QString& name, const QString& file);
    // As run(), over exactly these tokens (a conversation with its template); `label` becomes the result's prompt.
    void runTokens(qint64 id, const QString& label, const std::vector<int32_t>& tokens, bool logitLens,
                   const strata::ui::AblationList& ablations = {});
    // Causal tools (defined in worker/worker_causal.cpp). Each runs with `ablations` in force.
    // Two prompts (<|begin_of_text|> + text each): residual differences and the last position's logit change.
    void compare(qint64 id, const QString& clean, const QString& corrupt, const strata::ui::AblationList& ablations);
    // The patching sweep of causal.hpp, with progress (sweepProgress) and cancel (cancelUpTo).
    void patchSweep(qint64 id, const std::vector<int32_t>& clean, const std::vector<int32_t>& corrupt, int answer,
                    int foil, int site, const strata::ui::AblationList& ablations);
    // Direct logit attribution of `target` at `position` (-1: the last) over `tokens`.
    void attribute(qint64 id, const std::vector<int32_t>& tokens, int target, int position,
                   const strata::ui::AblationList& ablations);
    // Chat and logits explorer (defined in ui/chat/worker_chat.cpp): one reply, streamed token by token, reusing
    // the KV cache where the conversation is unchanged; stopped by request->stop, not by cancelUpTo.
    void chatGenerate(qint64 id, const strata::ui::ChatRequestPtr& request);
    // The logits of a run's position and, with `lens`, every block's residual there through norm and output.
    void positionLogits(qint64 id, const strata::ui::RunResultPtr& run, int position, bool lens);

signals:
    void loadProgress(qint64 id, const strata::ui::LoadStatus& status);
    void modelLoaded(qint64 id, const strata::ui::ModelSummaryPtr& summary);
    void runFinished(const strata::ui::RunResultPtr& result);
    void lensFinished(const strata::ui::LensResultPtr& result);
    void nearestFinished(const strata::ui::NearestResultPtr& result);
    void weightPreviewFinished(const strata::ui::WeightPreviewPtr& preview);
    void weightExported(qint64 id, const QString& file);
    // A task stopped because it was cancelled (not an error).
    void cancelled(qint64 id, const QString& what);
    // A task failed: what was being done, and the engine's message.
    void failed(qint64 id, const QString& what, const QString& message);
    // Chat: the prompt is in the cache, each token, the end (always sent, with the error when it failed).
    void chatStarted(qint64 id, const strata::ui::ChatStartPtr& start);
    void chatToken(qint64 id, const strata::ui::ChatTokenPtr& token);
    void chatFinished(qint64 id, const strata::ui::ChatOutcomePtr& outcome);
    void positionLogitsFinished(const strata::ui::PositionLogitsPtr& result);
    void compareFinished(const strata::ui::CompareResultPtr& result);
    void sweepProgress(qint64 id, qint64 done, qint64 total);
    void sweepFinished(const strata::ui::SweepResultPtr& result);
    void attributionFinished(const strata::ui::AttributionResultPtr& result);
    // The Vulkan devices by index ("llvmpipe (LLVM 15.0.6, 256 bits) (cpu)"), the one chosen by default (-1:
    // none), and, when there is no usable device, why.
    void devicesListed(const QStringList& devices, int chosen, const QString& problem);

private:
    void beginTask(qint64 id);
    void load(qint64 id, const QString& path, const QString& backend);
    QString tokenText(int32_t id) const;
    std::vector<int32_t> promptTokens(const QString& text) const;  // <|begin_of_text|> + text
    // The plain pass over `tokens` with the explorer's trace (cached: the last one is kept for the ablations'
    // diff and mean ablation, so toggling an ablation does not rerun it).
    RunResultPtr plainRun(qint64 id, const QString& label, const std::vector<int32_t>& tokens);
    // The ablations as engine interventions; mean ablations take their means from `clean`'s trace.
    Interventions resolve(const AblationList& ablations, const Trace* clean) const;
    // As resolve(), running the plain pass over `tokens` first when a mean ablation needs it.
    Interventions resolveFor(qint64 id, const AblationList& ablations, const std::vector<int32_t>& tokens);
    // One prefill with the explorer's trace and the statistics the views need. Refused (InputError) before
    // anything is allocated when the run, and the logit lens after it when `lens`, would not fit in memory.
    std::shared_ptr<RunResult> prefillRun(qint64 id, const QString& label, const std::vector<int32_t>& tokens,
                                          const Interventions& interventions, bool lens = false);
    ChatEngine& chatEngine();  // made on first use for the loaded model

    std::atomic<bool> abort_{false};
    std::atomic<bool> shutdown_{false};
    // The stop flag of the reply being generated (chat requests carry their own); shutdown() raises it.
    std::mutex chatStopMutex_;
    std::shared_ptr<std::atomic<bool>> chatStop_;
    std::atomic<qint64> cancelledUpTo_{0};
    std::atomic<uint64_t> memoryLimit_{0};

    // Destroyed in reverse order: transformer, backend, model.
    std::unique_ptr<Model> model_;
    std::unique_ptr<Backend> backend_;
    std::unique_ptr<Transformer> transformer_;
    std::unique_ptr<ChatEngine> chat_;  // refers to model_ and backend_: released before them
    QString backendNote_;
    std::vector<float> embeddingNorms_;  // [vocab], computed on first use
    RunResultPtr plainCache_;            // the last plain pass (plainRun), for this model
};

}  // namespace strata::ui
