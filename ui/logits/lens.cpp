#include "logits/lens.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "strata/error.hpp"
#include "worker/analysis.hpp"

namespace strata::ui::lens {

namespace {

bool cancelled(const std::atomic<bool>* cancel) { return cancel && cancel->load(std::memory_order_relaxed); }

// Four partial sums: independent chains the compiler keeps in vector registers.
float dot(const float* a, const float* b, int64_t n) {
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += a[i] * b[i];
        s1 += a[i + 1] * b[i + 1];
        s2 += a[i + 2] * b[i + 2];
        s3 += a[i + 3] * b[i + 3];
    }
    for (; i < n; ++i) s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

// Row `position` of a traced [T, n] tensor, whose first row is position trace.pos0.
std::span<const float> rowAt(const Trace& trace, const std::string& name, int64_t position) {
    const TracedTensor* t = trace.find(name);
    if (!t) throw ModelError("the trace has no " + name + " (run the prompt again with the full trace)");
    const int64_t r = position - trace.pos0;
    if (r < 0 || r >= t->rows)
        throw InputError("position " + std::to_string(position) + " is outside " + name + " (positions " +
                         std::to_string(trace.pos0) + ".." + std::to_string(trace.pos0 + t->rows - 1) + ")");
    return std::span<const float>(t->data).subspan(size_t(r * t->cols), size_t(t->cols));
}

}  // namespace

std::vector<float> project_rows(const TensorView& w, std::span<const float> x, int64_t rows,
                                const std::atomic<bool>* cancel) {
    const int64_t vocab = w.rows(), dim = w.cols();
    if (rows * dim != int64_t(x.size()))
        throw InputError("project_rows: " + std::to_string(x.size()) + " values are not " + std::to_string(rows) +
                         " rows of " + std::to_string(dim) + " (" + w.name + ")");
    std::vector<float> out(size_t(rows * vocab));  // [rows, vocab]
    analysis::parallel_for(vocab, 2048, [&](int64_t b, int64_t e) {
        std::vector<float> wrow(static_cast<size_t>(dim));  // [dim]
        for (int64_t v = b; v < e; ++v) {
            if (((v - b) & 1023) == 0 && cancelled(cancel)) return;
            w.row_to_f32(v, wrow.data());
            for (int64_t r = 0; r < rows; ++r) out[size_t(r * vocab + v)] = dot(wrow.data(), x.data() + r * dim, dim);
        }
    });
    if (cancelled(cancel)) throw Cancelled();
    return out;
}

std::vector<float> residual_rows(const Trace& trace, int64_t n_layers, int64_t position) {
    std::vector<float> x;  // [n_layers + 1, dim]
    for (int64_t l = 0; l <= n_layers; ++l) {
        const std::span<const float> row = rowAt(trace, l == 0 ? std::string("x0") : "h." + std::to_string(l - 1), position);
        x.insert(x.end(), row.begin(), row.end());
    }
    return x;
}

std::vector<float> logit_lens(Transformer& transformer, const Trace& trace, int64_t position) {
    const int64_t L = transformer.model().config.n_layers;
    return transformer.project(residual_rows(trace, L, position), L + 1);
}

std::vector<float> logits_at(const Model& model, const Trace& trace, int64_t position, const std::atomic<bool>* cancel) {
    const TracedTensor* logits = trace.find("logits");
    const TracedTensor* norm = trace.find("norm");
    const bool everyRow = logits && norm && logits->rows == norm->rows;
    if (everyRow) {
        const std::span<const float> row = rowAt(trace, "logits", position);
        return std::vector<float>(row.begin(), row.end());
    }
    const std::span<const float> z = rowAt(trace, "norm", position);  // [dim]
    return project_rows(model.output_weight(), z, 1, cancel);
}

std::vector<RowSummary> summarize_rows(std::span<const float> rows, int64_t n_rows, int64_t vocab, int k) {
    std::vector<RowSummary> out(static_cast<size_t>(n_rows));
    k = int(std::clamp<int64_t>(k, 0, vocab));
    std::vector<int32_t> ids(static_cast<size_t>(vocab));
    for (int64_t r = 0; r < n_rows; ++r) {
        const std::span<const float> row = rows.subspan(size_t(r * vocab), size_t(vocab));
        const analysis::LogitStats st = analysis::logit_stats(row);
        std::iota(ids.begin(), ids.end(), 0);
        std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
            return row[size_t(a)] != row[size_t(b)] ? row[size_t(a)] > row[size_t(b)] : a < b;
        });
        RowSummary& s = out[size_t(r)];
        s.entropy = st.entropy;
        for (int i = 0; i < k; ++i) {
            s.top.push_back(ids[size_t(i)]);
            s.prob.push_back(std::exp(double(row[size_t(ids[size_t(i)])]) - st.log_sum_exp));
        }
    }
    return out;
}

TokenTrack track_token(std::span<const float> rows, int64_t n_rows, int64_t vocab, int32_t id) {
    TokenTrack t;
    if (id < 0 || id >= vocab) return t;
    for (int64_t r = 0; r < n_rows; ++r) {
        const std::span<const float> row = rows.subspan(size_t(r * vocab), size_t(vocab));
        const float l = row[size_t(id)];
        int64_t rank = 0;
        for (int64_t v = 0; v < vocab; ++v)
            if (row[size_t(v)] > l || (row[size_t(v)] == l && v < id)) ++rank;
        t.rank.push_back(rank);
        t.prob.push_back(std::exp(double(l) - analysis::logit_stats(row).log_sum_exp));
    }
    return t;
}

}  // namespace strata::ui::lens
