#pragma once
// The logits of one position and the logit lens there: each block's residual h.N (and the embedding x0) passed
// through the final norm and the output projection, as if the model stopped after that block. Run on the engine
// worker when the user asks (full rows over the vocabulary); the summaries are cheap and run on the GUI thread.
// Plain C++ over the engine's types (no Qt), so tests check them against the model's own logits.
#include <atomic>
#include <cstdint>
#include <span>
#include <vector>

#include "strata/model.hpp"
#include "strata/trace.hpp"
#include "strata/transformer.hpp"

namespace strata::ui::lens {

// out[r, v] = w[v, :] . x[r, :] for every row of x [rows, dim] and of w [vocab, dim]: out is [rows, vocab].
// One pass over w (each weight row is widened once and used for every x row), split across threads.
std::vector<float> project_rows(const TensorView& w, std::span<const float> x, int64_t rows,
                                const std::atomic<bool>* cancel = nullptr);

// The residual stream at `position` after the embedding and after each block: [n_layers + 1, dim]
// (x0, h.0 .. h.{L-1}). Throws ModelError when the trace lacks one of them or the position.
std::vector<float> residual_rows(const Trace& trace, int64_t n_layers, int64_t position);

// The logit lens at `position`: rmsnorm with the final norm's gain, then the output projection, run on the
// transformer's backend (the GPU when the explorer uses Vulkan) by Transformer::project.
// [n_layers + 1, vocab]; the last row is the model's own logits (h.{L-1} -> norm -> output).
std::vector<float> logit_lens(Transformer& transformer, const Trace& trace, int64_t position);

// The model's logits at `position`: the trace's row when it kept logits for every position, else output(norm)
// from the kept final-norm row. [vocab]
std::vector<float> logits_at(const Model& model, const Trace& trace, int64_t position,
                             const std::atomic<bool>* cancel = nullptr);

// Per lens row: the k most likely tokens, their probabilities, and the row's entropy (nats).
struct RowSummary {
    std::vector<int32_t> top;
    std::vector<double> prob;
    double entropy = 0.0;
};
std::vector<RowSummary> summarize_rows(std::span<const float> rows, int64_t n_rows, int64_t vocab, int k);

// One token followed through the rows: its rank (0 = most likely; ties to the lower id) and probability.
struct TokenTrack {
    std::vector<int64_t> rank;
    std::vector<double> prob;
};
TokenTrack track_token(std::span<const float> rows, int64_t n_rows, int64_t vocab, int32_t id);

}  // namespace strata::ui::lens
