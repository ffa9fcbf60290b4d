#pragma once
// The trained demonstration model and what the tests measure on it (the same on every backend): next-token loss,
// the induction score on a repeated random span of common tokens, greedy completion. docs/demo-model.md reports
// these numbers; the bounds the tests hold them to are recorded there too.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "strata/backend.hpp"
#include "strata/demo.hpp"
#include "strata/model.hpp"
#include "strata/transformer.hpp"
#include "support.hpp"

namespace strata::test {

// Expanded once per process from the weights embedded in the engine.
inline const std::filesystem::path& trained_demo_dir() {
    static const std::filesystem::path dir = [] {
        const std::filesystem::path d = temp_dir("trained-demo");
        make_demo_model(d, tokenizer_json());
        return d;
    }();
    return dir;
}

// The random-weights demonstration model (make-demo --random), expanded once per process: for tests that need
// generation to go on (greedy decoding from it reaches no end token) rather than structure.
inline const std::filesystem::path& random_demo_dir() {
    static const std::filesystem::path dir = [] {
        const std::filesystem::path d = temp_dir("random-demo");
        DemoOptions o;
        o.random = true;
        make_demo_model(d, tokenizer_json(), o);
        return d;
    }();
    return dir;
}

// One prefill keeping the logits at every position ("logits", [T, vocab]) and, on request, the attention
// probabilities of every layer.
inline Trace prefill_all(const Model& model, Backend& backend, const std::vector<int32_t>& ids,
                         bool attention_probs = false) {
    Transformer tf(model, backend);
    KVCache cache(backend, model.config, static_cast<int64_t>(ids.size()));
    TraceRequest req;
    req.residuals = false;
    req.logits_all_positions = true;
    req.keep_logits = true;
    req.attention_probs = attention_probs;
    req.top_k = 0;
    return tf.prefill(cache, ids, req);
}

// The logits at every position ([T, vocab], row-major) of one prefill.
inline std::vector<float> all_logits(const Model& model, Backend& backend, const std::vector<int32_t>& ids) {
    return std::move(prefill_all(model, backend, ids).tensors.at("logits").data);
}

// -log p(ids[p+1] | ids[..p]) for p in [0, T-1), under the full 128256-way softmax, from the logits of every
// position.
inline std::vector<double> next_token_losses(const Model& model, const std::vector<float>& logits,
                                             const std::vector<int32_t>& ids) {
    const int64_t V = model.config.vocab_size;
    std::vector<double> out;
    for (size_t p = 0; p + 1 < ids.size(); ++p) {
        const float* row = logits.data() + static_cast<int64_t>(p) * V;
        const double mx = *std::max_element(row, row + V);
        double s = 0;
        for (int64_t i = 0; i < V; ++i) s += std::exp(double(row[i]) - mx);
        out.push_back(mx + std::log(s) - double(row[ids[p + 1]]));
    }
    return out;
}

inline std::vector<double> next_token_losses(const Model& model, Backend& backend, const std::vector<int32_t>& ids) {
    return next_token_losses(model, all_logits(model, backend, ids), ids);
}

inline double mean(const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0.0 : s / double(v.size());
}

// Common words that are one token with a leading space ("cat" -> " cat"), from the demonstration's world.
inline std::vector<int32_t> common_word_tokens(const Model& model) {
    static const char* words[] = {"cat", "dog", "bird", "fish", "house", "garden", "park", "river", "happy", "sad",
                                  "red", "blue", "green", "big", "small", "old", "new", "book", "ball", "box",
                                  "apples", "bread", "milk", "rice", "tea", "soup", "cake", "Monday", "Friday",
                                  "May", "June", "one", "two", "three", "five", "seven", "ten", "Tom", "Anna",
                                  "Sam", "Lily", "Ben", "Max", "Emma", "sun", "tree", "door", "window", "chair",
                                  "table", "cup", "bag", "key", "hat", "boat", "school", "shop", "city", "friend"};
    std::vector<int32_t> ids;
    for (const char* w : words) {
        const auto e = model.tokenizer.encode(std::string(" ") + w);
        if (e.size() == 1) ids.push_back(e[0]);
    }
    return ids;
}

struct InductionScore {
    double first = 0, second = 0;  // mean next-token loss inside the first and inside the second copy
    // Per head (layer * n_heads + head): the prefix-matching score, the attention a token of the second copy puts
    // on the token that followed its earlier occurrence, averaged over the queries of every sequence.
    std::vector<double> prefix_matching;
    double ratio() const { return second / first; }
    int best_head() const {
        return int(std::max_element(prefix_matching.begin(), prefix_matching.end()) - prefix_matching.begin());
    }
    double best_score() const { return prefix_matching.at(size_t(best_head())); }
};

// [BOS] + s + g + s for n random spans s of 10 to `length` common tokens and gaps g of 0 to 10 (a fixed seed):
// the second copy can be predicted only by looking back at the first, which is what an induction head does. The
// span and the gap vary so that a head attending a fixed distance back does not pass for one (docs/demo-model.md).
inline InductionScore induction_score(const Model& model, Backend& backend, int n, int length, uint64_t seed) {
    const std::vector<int32_t> pool = common_word_tokens(model);
    const ModelConfig& c = model.config;
    std::mt19937_64 rng(seed);
    InductionScore s;
    s.prefix_matching.assign(size_t(c.n_layers * c.n_heads), 0.0);
    for (int k = 0; k < n; ++k) {
        const int L = 10 + int(rng() % uint64_t(length - 9)), gap = int(rng() % 11);
        std::vector<int32_t> span, between;
        for (int i = 0; i < L; ++i) span.push_back(pool[rng() % pool.size()]);
        for (int i = 0; i < gap; ++i) between.push_back(pool[rng() % pool.size()]);
        std::vector<int32_t> ids = {c.bos_id};
        ids.insert(ids.end(), span.begin(), span.end());
        ids.insert(ids.end(), between.begin(), between.end());
        ids.insert(ids.end(), span.begin(), span.end());
        const int64_t o = 1 + L + gap;  // where the second copy starts
        const Trace t = prefill_all(model, backend, ids, true);
        const std::vector<double> l = next_token_losses(model, t.tensors.at("logits").data, ids);  // l[p]: ids[p+1]
        s.first += mean(std::vector<double>(l.begin() + 1, l.begin() + L)) / n;
        s.second += mean(std::vector<double>(l.begin() + o, l.begin() + o + L - 1)) / n;
        const int64_t T = static_cast<int64_t>(ids.size());
        for (int64_t layer = 0; layer < c.n_layers; ++layer) {
            const TracedTensor& p = t.tensors.at("layers." + std::to_string(layer) + ".attention.probs");
            for (int64_t h = 0; h < c.n_heads; ++h)
                for (int64_t i = 1; i + 1 < L; ++i)  // s[i] in the second copy attends to s[i+1] in the first
                    s.prefix_matching[size_t(layer * c.n_heads + h)] +=
                        double(p.data[size_t((h * T + o + i) * p.cols + 2 + i)]) / double(L - 2) / n;
        }
    }
    return s;
}

// Greedy decoding: n tokens after the prompt (stopping at an end token, which is included).
inline std::vector<int32_t> greedy(const Model& model, Backend& backend, std::vector<int32_t> ids, int n) {
    Transformer tf(model, backend);
    KVCache cache(backend, model.config, static_cast<int64_t>(ids.size()) + n);
    TraceRequest req;
    req.residuals = false;
    req.top_k = 1;
    Trace t = tf.prefill(cache, ids, req);
    std::vector<int32_t> out;
    for (int i = 0; i < n; ++i) {
        const int32_t next = t.top_k.back().front().id;
        out.push_back(next);
        if (next == 128009 || next == 128001) break;
        if (i + 1 < n) t = tf.decode(cache, next, req);
    }
    return out;
}

// resources/demo/heldout.json: token sequences from the generator's held-out seed.
inline std::vector<std::vector<int32_t>> heldout_sequences() {
    const nlohmann::json j = nlohmann::json::parse(read_file(std::filesystem::path(STRATA_SOURCE_DIR) /
                                                             "resources" / "demo" / "heldout.json"));
    return j.at("sequences").get<std::vector<std::vector<int32_t>>>();
}

}  // namespace strata::test
