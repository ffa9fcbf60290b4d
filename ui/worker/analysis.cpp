#include "worker/analysis.hpp"

#include <exception>
#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <thread>

#include "strata/backend.hpp"
#include "strata/error.hpp"
#include "strata/model.hpp"
#include "strata/trace.hpp"
#include "strata/transformer.hpp"

namespace strata::ui::analysis {

namespace {

bool cancelled(const std::atomic<bool>* cancel) { return cancel && cancel->load(std::memory_order_relaxed); }

float dot(const float* a, const float* b, int64_t n) {
    // Four partial sums: independent chains the compiler can keep in vector registers.
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

}  // namespace

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
    if (n <= 0) return;
    const int64_t hw = std::max<int64_t>(1, std::thread::hardware_concurrency());
    const int64_t chunks = std::clamp<int64_t>(n / std::max<int64_t>(1, grain), 1, hw);
    if (chunks == 1) {
        fn(0, n);
        return;
    }
    // An exception must not leave a thread's function (std::terminate would end the app): each thread keeps the
    // first one, and it is thrown again here, after every thread has joined.
    std::vector<std::exception_ptr> errors(static_cast<size_t>(chunks));
    std::vector<std::thread> threads;
    threads.reserve(size_t(chunks));
    for (int64_t c = 0; c < chunks; ++c) {
        const int64_t b = n * c / chunks, e = n * (c + 1) / chunks;
        threads.emplace_back([&fn, &errors, c, b, e] {
            try {
                fn(b, e);
            } catch (...) {
                errors[size_t(c)] = std::current_exception();
            }
        });
    }
    for (auto& t : threads) t.join();
    for (const std::exception_ptr& e : errors)
        if (e) std::rethrow_exception(e);
}

std::vector<float> rmsnorm_rows(std::span<const float> x, int64_t rows, std::span<const float> gain, float eps) {
    const int64_t cols = int64_t(gain.size());
    if (rows * cols != int64_t(x.size())) throw InputError("rmsnorm_rows: x does not hold rows x gain.size() values");
    std::vector<float> y(x.size());  // [rows, cols]
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x.data() + r * cols;
        double ss = 0;
        for (int64_t j = 0; j < cols; ++j) ss += double(xr[j]) * xr[j];
        const float inv = float(1.0 / std::sqrt(ss / double(cols) + eps));
        for (int64_t j = 0; j < cols; ++j) y[size_t(r * cols + j)] = xr[j] * inv * gain[size_t(j)];
    }
    return y;
}

TopTokens top_token_per_row(const TensorView& w, std::span<const float> x, int64_t rows,
                            const std::atomic<bool>* cancel) {
    const int64_t vocab = w.rows(), dim = w.cols();
    if (rows * dim != int64_t(x.size()))
        throw InputError("logit lens: " + std::to_string(x.size()) + " values are not " + std::to_string(rows) +
                         " rows of " + std::to_string(dim) + " (" + w.name + ")");
    // Per chunk: the best logit per row and an online log-sum-exp (running max m, sum of exp(l - m)).
    struct Partial {
        std::vector<int32_t> best_id;
        std::vector<float> best;
        std::vector<double> m, s;
    };
    std::vector<Partial> parts;
    std::mutex parts_mutex;
    parallel_for(vocab, 2048, [&](int64_t b, int64_t e) {
        Partial p;
        p.best_id.assign(size_t(rows), 0);
        p.best.assign(size_t(rows), -std::numeric_limits<float>::infinity());
        p.m.assign(size_t(rows), -std::numeric_limits<double>::infinity());
        p.s.assign(size_t(rows), 0.0);
        std::vector<float> wrow(static_cast<size_t>(dim));  // [dim]
        for (int64_t v = b; v < e; ++v) {
            if (((v - b) & 1023) == 0 && cancelled(cancel)) return;
            w.row_to_f32(v, wrow.data());
            for (int64_t r = 0; r < rows; ++r) {
                const float l = dot(wrow.data(), x.data() + r * dim, dim);
                if (l > p.best[size_t(r)]) {
                    p.best[size_t(r)] = l;
                    p.best_id[size_t(r)] = int32_t(v);
                }
                double& m = p.m[size_t(r)];
                double& s = p.s[size_t(r)];
                if (l > m) {
                    s = s * std::exp(m - l) + 1.0;
                    m = l;
                } else {
                    s += std::exp(double(l) - m);
                }
            }
        }
        std::lock_guard<std::mutex> lock(parts_mutex);
        parts.push_back(std::move(p));
    });
    if (cancelled(cancel)) throw Cancelled();

    TopTokens out;
    out.id.assign(size_t(rows), 0);
    out.logit.assign(size_t(rows), -std::numeric_limits<float>::infinity());
    out.prob.assign(size_t(rows), 0.0f);
    for (int64_t r = 0; r < rows; ++r) {
        double m = -std::numeric_limits<double>::infinity(), s = 0;
        for (const Partial& p : parts) {
            const size_t i = size_t(r);
            // Lower ids win ties, whatever order the chunks finished in.
            if (p.best[i] > out.logit[i] || (p.best[i] == out.logit[i] && p.best_id[i] < out.id[i])) {
                out.logit[i] = p.best[i];
                out.id[i] = p.best_id[i];
            }
            if (p.s[i] == 0) continue;
            const double mm = std::max(m, p.m[i]);
            s = (s == 0 ? 0 : s * std::exp(m - mm)) + p.s[i] * std::exp(p.m[i] - mm);
            m = mm;
        }
        out.prob[size_t(r)] = float(std::exp(double(out.logit[size_t(r)]) - (m + std::log(s))));
    }
    return out;
}

TopTokens top_token_on_backend(Transformer& transformer, std::span<const float> x, int64_t rows,
                               const std::atomic<bool>* cancel) {
    const ModelConfig& c = transformer.model().config;
    const int64_t dim = c.dim, vocab = c.vocab_size;
    if (rows * dim != int64_t(x.size())) throw InputError("logit lens: the residual rows are not rows of dim");
    // Chunks of rows whose logits stay near 64 MB, read back and reduced on the host.
    const int64_t chunk = lens_chunk_rows(vocab);
    TopTokens out;
    out.id.assign(size_t(rows), 0);
    out.logit.assign(size_t(rows), 0.0f);
    out.prob.assign(size_t(rows), 0.0f);
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        if (cancelled(cancel)) throw Cancelled();
        const int64_t n = std::min(chunk, rows - r0);
        const std::vector<float> l = transformer.project(x.subspan(size_t(r0 * dim), size_t(n * dim)), n);  // [n, vocab]
        for (int64_t r = 0; r < n; ++r) {
            const float* row = l.data() + r * vocab;
            const int64_t best = std::max_element(row, row + vocab) - row;  // first maximum: the lowest id
            const LogitStats st = logit_stats(std::span<const float>(row, size_t(vocab)));
            out.id[size_t(r0 + r)] = int32_t(best);
            out.logit[size_t(r0 + r)] = row[best];
            out.prob[size_t(r0 + r)] = float(std::exp(double(row[best]) - st.log_sum_exp));
        }
    }
    return out;
}

int64_t lens_chunk_rows(int64_t vocab) { return std::clamp<int64_t>((int64_t(16) << 20) / std::max<int64_t>(1, vocab), 1, 128); }

TopTokens logit_lens_top(Transformer& transformer, const Trace& trace, const std::atomic<bool>* cancel) {
    const int64_t L = transformer.model().config.n_layers;
    TopTokens out;
    for (int64_t l = 0; l <= L; ++l) {
        const std::string name = l == 0 ? std::string("x0") : "h." + std::to_string(l - 1);
        const TracedTensor* h = trace.find(name);  // [T, dim]
        if (!h) throw ModelError("the trace has no " + name + " for the logit lens");
        const TopTokens part = top_token_on_backend(transformer, h->data, h->rows, cancel);
        out.id.insert(out.id.end(), part.id.begin(), part.id.end());
        out.logit.insert(out.logit.end(), part.logit.begin(), part.logit.end());
        out.prob.insert(out.prob.end(), part.prob.begin(), part.prob.end());
    }
    return out;
}

std::vector<float> row_norms(const TensorView& w, const std::atomic<bool>* cancel) {
    const int64_t n = w.rows(), dim = w.cols();
    std::vector<float> norms(size_t(n), 0.0f);  // [vocab]
    parallel_for(n, 4096, [&](int64_t b, int64_t e) {
        std::vector<float> row(static_cast<size_t>(dim));
        for (int64_t v = b; v < e; ++v) {
            if (((v - b) & 4095) == 0 && cancelled(cancel)) return;
            w.row_to_f32(v, row.data());
            norms[size_t(v)] = std::sqrt(dot(row.data(), row.data(), dim));
        }
    });
    if (cancelled(cancel)) throw Cancelled();
    return norms;
}

std::vector<std::pair<int32_t, float>> nearest_rows(const TensorView& w, std::span<const float> norms,
                                                    std::span<const float> query, int k,
                                                    const std::atomic<bool>* cancel) {
    const int64_t n = w.rows(), dim = w.cols();
    if (int64_t(query.size()) != dim || int64_t(norms.size()) != n)
        throw InputError("nearest_rows: query or norms do not match " + w.name);
    const float qn = std::sqrt(dot(query.data(), query.data(), dim));
    std::vector<float> cos(size_t(n), 0.0f);  // [vocab]
    parallel_for(n, 4096, [&](int64_t b, int64_t e) {
        std::vector<float> row(static_cast<size_t>(dim));
        for (int64_t v = b; v < e; ++v) {
            if (((v - b) & 4095) == 0 && cancelled(cancel)) return;
            w.row_to_f32(v, row.data());
            const float den = norms[size_t(v)] * qn;
            cos[size_t(v)] = den > 0 ? dot(row.data(), query.data(), dim) / den : 0.0f;
        }
    });
    if (cancelled(cancel)) throw Cancelled();
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (int64_t v = 0; v < n; ++v) ids[size_t(v)] = int32_t(v);
    const size_t kk = std::min<size_t>(size_t(std::max(k, 0)), ids.size());
    auto better = [&](int32_t a, int32_t b) { return cos[size_t(a)] > cos[size_t(b)] || (cos[size_t(a)] == cos[size_t(b)] && a < b); };
    std::partial_sort(ids.begin(), ids.begin() + std::ptrdiff_t(kk), ids.end(), better);
    std::vector<std::pair<int32_t, float>> out;
    out.reserve(kk);
    for (size_t i = 0; i < kk; ++i) out.emplace_back(ids[i], cos[size_t(ids[i])]);
    return out;
}

namespace {
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

void keep_extreme(float& cell, float v) {
    if (std::fabs(v) > std::fabs(cell)) cell = v;
}
}  // namespace

Reduced reduce_max_abs(const TensorView& w, int64_t max_rows, int64_t max_cols, const std::atomic<bool>* cancel) {
    const int64_t rows = w.shape.size() < 2 ? 1 : w.rows();
    const int64_t cols = w.cols();
    Reduced r;
    r.row_step = std::max<int64_t>(1, ceil_div(rows, std::max<int64_t>(1, max_rows)));
    r.col_step = std::max<int64_t>(1, ceil_div(cols, std::max<int64_t>(1, max_cols)));
    r.rows = ceil_div(rows, r.row_step);
    r.cols = ceil_div(cols, r.col_step);
    r.data.assign(size_t(r.rows * r.cols), 0.0f);  // [r.rows, r.cols]
    // Each output row is written by one thread only: split over output rows.
    parallel_for(r.rows, 8, [&](int64_t b, int64_t e) {
        std::vector<float> row(static_cast<size_t>(cols));
        for (int64_t orow = b; orow < e; ++orow) {
            if (cancelled(cancel)) return;
            float* out = r.data.data() + orow * r.cols;
            const int64_t r1 = std::min(rows, (orow + 1) * r.row_step);
            for (int64_t i = orow * r.row_step; i < r1; ++i) {
                if (w.shape.size() < 2) {
                    std::vector<float> all = w.to_f32();
                    std::copy(all.begin(), all.end(), row.begin());
                } else {
                    w.row_to_f32(i, row.data());
                }
                for (int64_t j = 0; j < cols; ++j) keep_extreme(out[j / r.col_step], row[size_t(j)]);
            }
        }
    });
    if (cancelled(cancel)) throw Cancelled();
    return r;
}

Reduced reduce_max_abs(std::span<const float> x, int64_t rows, int64_t cols, int64_t max_rows, int64_t max_cols) {
    Reduced r;
    r.row_step = std::max<int64_t>(1, ceil_div(rows, std::max<int64_t>(1, max_rows)));
    r.col_step = std::max<int64_t>(1, ceil_div(cols, std::max<int64_t>(1, max_cols)));
    r.rows = ceil_div(rows, r.row_step);
    r.cols = ceil_div(cols, r.col_step);
    r.data.assign(size_t(r.rows * r.cols), 0.0f);
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j)
            keep_extreme(r.data[size_t((i / r.row_step) * r.cols + j / r.col_step)], x[size_t(i * cols + j)]);
    return r;
}

LogitStats logit_stats(std::span<const float> logits) {
    LogitStats st;
    if (logits.empty()) return st;
    const double m = *std::max_element(logits.begin(), logits.end());
    double s = 0, sl = 0;  // sum exp(l - m), sum exp(l - m) * (l - m)
    for (float l : logits) {
        const double d = double(l) - m;
        const double e = std::exp(d);
        s += e;
        sl += e * d;
    }
    st.log_sum_exp = m + std::log(s);
    // H = -sum p log p with p = e / s and log p = d - log s.
    st.entropy = std::log(s) - sl / s;
    return st;
}

float abs_quantile(std::span<const float> x, double q) {
    if (x.empty()) return 0.0f;
    // A strided sample keeps this cheap for [T, 14336] tensors; the range only has to be robust, not exact.
    const size_t max_samples = 200000;
    const size_t stride = std::max<size_t>(1, x.size() / max_samples);
    std::vector<float> a;
    a.reserve(x.size() / stride + 1);
    for (size_t i = 0; i < x.size(); i += stride)
        if (std::isfinite(x[i])) a.push_back(std::fabs(x[i]));
    if (a.empty()) return 0.0f;
    const size_t k = std::min(a.size() - 1, size_t(std::clamp(q, 0.0, 1.0) * double(a.size() - 1) + 0.5));
    std::nth_element(a.begin(), a.begin() + std::ptrdiff_t(k), a.end());
    return a[k];
}

PrefixMatching prefix_matching(std::span<const float> probs, int64_t heads, int64_t T, int64_t S,
                               std::span<const int32_t> tokens) {
    PrefixMatching pm;
    pm.score.assign(size_t(std::max<int64_t>(heads, 0)), 0.0f);
    if (heads <= 0 || T <= 0 || S < T || int64_t(tokens.size()) != T || int64_t(probs.size()) != heads * T * S)
        return pm;
    const int64_t k0 = S - T;  // key column of query 0 (0 when the run starts at position 0)
    std::vector<double> sum(size_t(heads), 0.0);
    std::vector<int64_t> after;  // keys that followed an earlier copy of the query's token
    for (int64_t t = 2; t < T; ++t) {
        after.clear();
        for (int64_t j = 0; j + 1 < t; ++j)
            if (tokens[size_t(j)] == tokens[size_t(t)]) after.push_back(j + 1);
        if (after.empty()) continue;
        ++pm.queries;
        for (int64_t h = 0; h < heads; ++h) {
            const float* row = probs.data() + (h * T + t) * S + k0;
            double a = 0.0;
            for (int64_t k : after) a += row[k];
            sum[size_t(h)] += a;
        }
    }
    if (pm.queries > 0)
        for (int64_t h = 0; h < heads; ++h) pm.score[size_t(h)] = float(sum[size_t(h)] / double(pm.queries));
    return pm;
}

}  // namespace strata::ui::analysis
