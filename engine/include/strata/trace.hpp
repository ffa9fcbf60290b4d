#pragma once
// Tracing: every intermediate tensor of a forward pass, named as in model.py.
//   x0                          the embedded tokens                        [T, dim]
//   layers.N.attention_norm     RMSNorm before attention                   [T, dim]
//   layers.N.q / .k / .v        projections after RoPE (q, k) / v          [T, n_heads*head_dim] / [T, kv_dim]
//   layers.N.attention.probs    softmax(QK^T/sqrt(d)) per head (on request) [n_heads*T, T0+T] (rows: head-major)
//   layers.N.attention.heads    softmax(scores) @ values, every head       [T, n_heads*head_dim] (before wo)
//   layers.N.attention_out      wo(attention)                              [T, dim]
//   layers.N.h                  residual after attention                   [T, dim]
//   layers.N.ffn_norm           RMSNorm before the feed-forward            [T, dim]
//   layers.N.ffn_hidden         silu(w1 x) * (w3 x)                        [T, hidden_dim]
//   layers.N.ffn_out            w2(ffn_hidden)                             [T, dim]
//   h.N                         residual after block N                     [T, dim]
//   norm                        final RMSNorm                              [T, dim]
//   logits                      output(norm)                               [T, vocab] (or the last row only)
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "strata/backend.hpp"
#include "strata/config.hpp"
#include "strata/intervention.hpp"

namespace strata {

struct TraceRequest {
    bool residuals = true;        // x0, h.N, norm
    bool all = false;             // every name above except attention.probs
    bool attention_probs = false; // layers.N.attention.probs (T x T per head: costly)
    std::set<std::string> names;  // extra names to keep
    bool logits_all_positions = false;  // logits for every position (forward/explorer), else the last row only
    bool keep_logits = false;     // keep "logits" in the trace (always computed for the rows above)
    int64_t top_k = 10;           // top-k of the logits per computed row (0 = none)
    // Called with each piece of logits rows as it is computed: (first row, [rows, vocab] values). With logits for
    // every position and no "logits" kept, the step holds only one piece (kLogitRowsPerPiece rows) at a time, so
    // a long prompt's statistics per position (entropy) cost no T x vocab buffer.
    std::function<void(int64_t row0, std::span<const float> rows)> on_logits;
    // Changes made at the sites as the pass reaches them (intervention.hpp); empty: the plain pass.
    Interventions interventions;

    bool wants(const std::string& name) const;  // is `name` kept under this request?
    static TraceRequest everything();           // all + probs + logits for all positions
};

struct TracedTensor {
    std::string name;
    int64_t rows = 0, cols = 0;   // [T, n] (probs: [n_heads*T, T0+T])
    std::vector<float> data;      // row-major float32
};

struct Trace {
    int64_t pos0 = 0;                 // position of the first traced row
    std::vector<int32_t> tokens;      // the tokens of this step
    std::map<std::string, TracedTensor> tensors;
    // top-k of the logits for each computed logits row (all positions, or only the last)
    std::vector<std::vector<TokenScore>> top_k;
    // The full logits of the last position (always kept: sampling needs it).
    std::vector<float> last_logits;

    const TracedTensor* find(const std::string& name) const;
};

// Logits rows computed (and, without "logits" kept, held) at once by a step.
inline constexpr int64_t kLogitRowsPerPiece = 64;

// Every name above for this model, block by block in the order a step reaches them (attention.probs and logits
// included), with the shape [rows, cols] a step of T tokens after pos0 cached positions gives it.
struct TracedShape {
    std::string name;
    int64_t rows = 0, cols = 0;
};
std::vector<TracedShape> trace_shapes(const ModelConfig& config, int64_t T, int64_t pos0 = 0);

// Bytes of host memory the trace of that step keeps under `request` (its tensors, the top-k rows and the last
// logits), estimated before the step runs so that a request that cannot fit is refused with a message.
uint64_t trace_bytes(const ModelConfig& config, const TraceRequest& request, int64_t T, int64_t pos0 = 0);

}  // namespace strata
