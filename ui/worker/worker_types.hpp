#pragma once
// The value types that travel between the engine worker and the GUI thread by signal. Everything here is a
// plain copyable value (or a shared pointer to an immutable one): the GUI never touches the engine's objects.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <QMetaType>
#include <QString>
#include <QStringList>

#include "strata/causal.hpp"
#include "strata/config.hpp"
#include "strata/trace.hpp"

namespace strata::ui {

struct WeightInfo {
    QString dtype;                // "BF16", "F32", ...
    std::vector<int64_t> shape;   // torch order: [out_features, in_features] or [n]
    uint64_t numel() const;
};

// What the window needs to know about a loaded model.
struct ModelSummary {
    ModelConfig config;
    QString path;
    QString name;
    QString format;        // "huggingface", "meta", "gguf"
    QString dtype;         // storage type of the block weights (layers.0.attention.wq)
    QString backend;       // "cpu" / "vulkan"
    QString device;
    QString deviceType;
    QString backendNote;   // why the requested backend is not the one in use (empty when it is)
    uint64_t parameters = 0;
    std::map<std::string, uint64_t> parameterGroups;
    uint64_t fileBytes = 0;
    std::map<std::string, WeightInfo> weights;         // canonical name -> type and shape
    std::map<std::string, std::vector<float>> gains;   // RMSNorm gains: layers.N.attention_norm, layers.N.ffn_norm, norm
};

// LoadProgress, forwarded to the GUI (throttled).
struct LoadStatus {
    QString phase;                // "reading checkpoint", "uploading to vulkan", ...
    uint64_t bytesDone = 0, bytesTotal = 0;
    int64_t tensorsDone = 0, tensorsTotal = 0;
};

// An ablation as a person asks for it in the explorer: an ablation spec of intervention.hpp
// ("layers.3.attention.heads.5", "layers.2.feed_forward.neurons.17", "layers.1") and whether the ablated
// activation becomes zero or its mean over the prompt's positions in the plain run (mean ablation).
struct AblationSpec {
    QString spec;
    bool mean = false;
    QString label() const { return mean ? spec + QStringLiteral(" (mean)") : spec; }
    bool operator==(const AblationSpec& o) const { return spec == o.spec && mean == o.mean; }
};
using AblationList = std::vector<AblationSpec>;

struct RunResult;
using RunResultPtr = std::shared_ptr<const RunResult>;

// A prefill of the prompt with the kept trace.
struct RunResult {
    qint64 id = 0;
    QString prompt;
    std::vector<int32_t> tokens;                // [T], BOS first
    QStringList tokenTexts;                     // display text of each token (spaces and newlines made visible)
    Trace trace;
    std::vector<double> logSumExp;              // [T] log of the softmax denominator of each position's logits
    std::vector<double> entropy;                // [T] entropy (nats) of each position's next-token distribution
    std::map<int32_t, QString> vocabText;       // display text of every token id in the top-k lists
    double seconds = 0.0;                       // the prefill's wall time
    bool hasProbs = false;                      // attention probabilities were kept
    // With ablations: the trace above is the intervened pass, and `clean` the plain pass over the same tokens
    // (the diff mode subtracts it; mean ablation took its means from it). Empty ablations: clean is null.
    AblationList ablations;
    RunResultPtr clean;
};

// Logit lens: every residual row (x0, h.0 .. h.{N-1}) through the final norm and output.
struct LensResult {
    qint64 runId = 0;
    int64_t rows = 0;                 // n_layers + 1 (x0 first)
    int64_t positions = 0;            // T
    std::vector<int32_t> top;         // [rows, T] argmax token id
    std::vector<float> prob;          // [rows, T] its softmax probability
    std::map<int32_t, QString> vocabText;
};

// A token's row of tok_embeddings and its nearest tokens by cosine similarity.
struct NearestResult {
    qint64 id = 0;
    int32_t token = 0;
    QString tokenText;
    std::vector<float> row;                        // [dim]
    std::vector<std::pair<int32_t, float>> nearest;  // (id, cosine), descending, the token itself first
    std::map<int32_t, QString> vocabText;
};

// A weight matrix reduced for display: each cell holds the signed value of largest magnitude in its bucket.
struct WeightPreview {
    qint64 id = 0;
    QString name;                   // canonical
    QString dtype;
    int64_t rows = 0, cols = 0;     // full shape (vectors: rows = 1)
    int64_t outRows = 0, outCols = 0;
    int64_t rowStep = 1, colStep = 1;  // bucket sizes
    std::vector<float> data;        // [outRows, outCols]
};

// Two prompts side by side (clean and corrupt): the residual stream's difference per layer and position, and
// the change of the last position's logits.
struct CompareResult {
    qint64 id = 0;
    std::vector<int32_t> cleanTokens, corruptTokens;  // BOS first
    QStringList cleanTexts, corruptTexts;
    QString problem;                  // why the residuals are not compared (the lengths differ); empty when they are
    int64_t rows = 0;                 // n_layers + 1: x0, h.0 .. h.{L-1}
    int64_t positions = 0;            // T (same for both), 0 when the lengths differ
    std::vector<float> diffNorm;      // [rows, T] || h_corrupt - h_clean ||
    std::vector<float> cosine;        // [rows, T] cos(h_clean, h_corrupt)
    struct Change {
        int32_t id = 0;
        float clean = 0, corrupt = 0;  // logits at the last position
    };
    std::vector<Change> rose, fell;   // the tokens whose logit rose / fell the most (corrupt - clean), largest first
    std::vector<int32_t> candidates;  // top tokens of both last positions (answer / foil pickers), clean first
    std::map<int32_t, QString> vocabText;
    AblationList ablations;           // in force in both runs
};

// The patching sweep (causal.hpp's PatchSweep) and what the view labels it with.
struct SweepResult {
    qint64 id = 0;
    PatchSweep sweep;                 // effect [n_layers][T]
    int32_t answer = 0, foil = 0;
    QString answerText, foilText;
    QStringList cleanTexts, corruptTexts;
    AblationList ablations;
    double seconds = 0.0;
};

// Direct logit attribution (causal.hpp's Attribution) of a run's token at a position.
struct AttributionResult {
    qint64 id = 0;
    Attribution attribution;
    QString targetText;
    std::vector<int32_t> tokens;
    QStringList tokenTexts;
    AblationList ablations;
};

using ModelSummaryPtr = std::shared_ptr<const ModelSummary>;
using LensResultPtr = std::shared_ptr<const LensResult>;
using NearestResultPtr = std::shared_ptr<const NearestResult>;
using WeightPreviewPtr = std::shared_ptr<const WeightPreview>;
using CompareResultPtr = std::shared_ptr<const CompareResult>;
using SweepResultPtr = std::shared_ptr<const SweepResult>;
using AttributionResultPtr = std::shared_ptr<const AttributionResult>;

// Registers the types above for queued connections (call once before connecting the worker).
void registerWorkerTypes();

}  // namespace strata::ui

Q_DECLARE_METATYPE(strata::ui::ModelSummaryPtr)
Q_DECLARE_METATYPE(strata::ui::LoadStatus)
Q_DECLARE_METATYPE(strata::ui::RunResultPtr)
Q_DECLARE_METATYPE(strata::ui::LensResultPtr)
Q_DECLARE_METATYPE(strata::ui::NearestResultPtr)
Q_DECLARE_METATYPE(strata::ui::WeightPreviewPtr)
Q_DECLARE_METATYPE(strata::ui::AblationList)
Q_DECLARE_METATYPE(strata::ui::CompareResultPtr)
Q_DECLARE_METATYPE(strata::ui::SweepResultPtr)
Q_DECLARE_METATYPE(strata::ui::AttributionResultPtr)
