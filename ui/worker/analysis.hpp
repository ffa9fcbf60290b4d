#pragma once
// Computations the explorer adds on top of the forward pass, run on the worker thread: the logit lens, nearest
// tokens in embedding space, reduced previews of weight matrices, per-position logit statistics.
// Plain C++ over the engine's types (no Qt), so tests can check them against direct formulas.
#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "strata/tensor.hpp"

namespace strata {
class Transformer;
struct Trace;
}

namespace strata::ui::analysis {

// Runs fn(begin, end) over [0, n) split across the hardware threads (at least `grain` items per chunk).
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

// y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * gain          x, y: [rows, cols]; gain: [cols]
std::vector<float> rmsnorm_rows(std::span<const float> x, int64_t rows, std::span<const float> gain, float eps);

// For each row of x [rows, dim], the argmax over the vocabulary of w @ x[r] (w: [vocab, dim]) and that token's
// softmax probability. One pass over w (each weight row is widened once and used for every x row).
struct TopTokens {
    std::vector<int32_t> id;    // [rows]
    std::vector<float> logit;   // [rows]
    std::vector<float> prob;    // [rows]
};
TopTokens top_token_per_row(const TensorView& w, std::span<const float> x, int64_t rows,
                            const std::atomic<bool>* cancel = nullptr);

// The same through the model's final norm and output on the transformer's backend (Transformer::project), in
// chunks of rows: x holds raw residual rows [rows, dim].
TopTokens top_token_on_backend(Transformer& transformer, std::span<const float> x, int64_t rows,
                               const std::atomic<bool>* cancel = nullptr);
// The rows of such a chunk (their logits stay near 64 MB).
int64_t lens_chunk_rows(int64_t vocab);

// The logit lens of a whole run: x0 and every h.N of the trace through the final norm and output, read straight
// from the traced tensors chunk by chunk (no copy of the residual stream). [(n_layers + 1) * T], x0's row first.
// Throws ModelError when the trace lacks one of them.
TopTokens logit_lens_top(Transformer& transformer, const Trace& trace, const std::atomic<bool>* cancel = nullptr);

// ||w[v, :]|| for every row of w (the embedding table: computed once per model).
std::vector<float> row_norms(const TensorView& w, const std::atomic<bool>* cancel = nullptr);

// The k rows of w most similar to `query` by cosine (norms from row_norms), descending, ties by lower id.
std::vector<std::pair<int32_t, float>> nearest_rows(const TensorView& w, std::span<const float> norms,
                                                    std::span<const float> query, int k,
                                                    const std::atomic<bool>* cancel = nullptr);

// A matrix reduced to at most max_rows x max_cols cells; each cell keeps the signed value of largest magnitude
// among the elements of its bucket, so outliers stay visible after reduction.
struct Reduced {
    int64_t rows = 0, cols = 0;          // the reduced shape
    int64_t row_step = 1, col_step = 1;  // bucket size in the full matrix
    std::vector<float> data;             // [rows, cols]
};
Reduced reduce_max_abs(const TensorView& w, int64_t max_rows, int64_t max_cols,
                       const std::atomic<bool>* cancel = nullptr);
Reduced reduce_max_abs(std::span<const float> x, int64_t rows, int64_t cols, int64_t max_rows, int64_t max_cols);

// log(sum(exp(logits))) and the entropy (nats) of softmax(logits).
struct LogitStats {
    double log_sum_exp = 0.0;
    double entropy = 0.0;
};
LogitStats logit_stats(std::span<const float> logits);

// The value below which fraction q of |x| lies (q in [0, 1]); 0 for empty input. Samples large inputs.
float abs_quantile(std::span<const float> x, double q);

// How much each head behaves like an induction head on this prompt: the prefix-matching score. For a query whose
// token occurred earlier (at j < t - 1), the attention it puts on the tokens that followed those occurrences
// (key j + 1), summed over them; averaged over such queries. An induction head scores near 1 on a repeated
// span; a head that ignores the repeat scores about what uniform attention would give.
//   probs: [heads * T, S] head-major, as traced (the last T key columns are the T query positions; S == T for
//   a run from position 0); tokens: the T ids. queries: how many queries had an earlier copy of their token (0:
//   the prompt repeats nothing and every score is 0).
struct PrefixMatching {
    std::vector<float> score;  // [heads]
    int64_t queries = 0;
};
PrefixMatching prefix_matching(std::span<const float> probs, int64_t heads, int64_t T, int64_t S,
                               std::span<const int32_t> tokens);

}  // namespace strata::ui::analysis
