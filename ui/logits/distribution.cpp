#include "logits/distribution.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "worker/analysis.hpp"

namespace strata::ui {

LogitsDistribution::LogitsDistribution(std::vector<float> logits, const SamplerSettings& sampling) : sampling_(sampling) {
    setLogits(std::move(logits));
}

void LogitsDistribution::setLogits(std::vector<float> logits) {
    logits_ = std::move(logits);
    const size_t n = logits_.size();
    order_.resize(n);
    std::iota(order_.begin(), order_.end(), 0);
    // NaN sorts last, as the sampler never picks it.
    auto key = [&](int32_t id) { return std::isnan(logits_[size_t(id)]) ? -INFINITY : logits_[size_t(id)]; };
    std::sort(order_.begin(), order_.end(), [&](int32_t a, int32_t b) { return key(a) != key(b) ? key(a) > key(b) : a < b; });
    rank_.assign(n, 0);
    for (size_t r = 0; r < n; ++r) rank_[size_t(order_[r])] = int64_t(r);
    prob_.assign(n, 0.0);
    cumulative_.assign(n, 0.0);
    entropy_ = 0.0;
    if (n > 0) {
        const analysis::LogitStats st = analysis::logit_stats(logits_);
        entropy_ = st.entropy;
        for (size_t v = 0; v < n; ++v) prob_[v] = std::isnan(logits_[v]) ? 0.0 : std::exp(double(logits_[v]) - st.log_sum_exp);
        double cum = 0;
        for (size_t r = 0; r < n; ++r) cumulative_[r] = (cum += prob_[size_t(order_[r])]);
    }
    setSampling(sampling_);
}

void LogitsDistribution::setSampling(const SamplerSettings& sampling) {
    sampling_ = sampling;
    sampled_ = sampling_distribution(logits_, sampling_);
    survivors_ = 0;
    survivingMass_ = 0.0;
    sampledEntropy_ = 0.0;
    for (size_t v = 0; v < sampled_.size(); ++v) {
        const double p = sampled_[v];
        if (p <= 0) continue;
        ++survivors_;
        survivingMass_ += prob_[v];
        sampledEntropy_ -= p * std::log(p);
    }
}

double LogitsDistribution::perplexity() const { return std::exp(entropy_); }

double LogitsDistribution::sampledPerplexity() const { return std::exp(sampledEntropy_); }

std::vector<int32_t> LogitsDistribution::find(const QString& query, const Vocabulary& vocab, int limit) const {
    std::vector<int32_t> out;
    const QString& q = query;
    if (q.isEmpty() || empty()) return out;
    QString digits = q.trimmed();
    if (digits.startsWith(QLatin1Char('#'))) digits.remove(0, 1);
    bool isId = false;
    const qlonglong id = digits.toLongLong(&isId);
    if (isId && id >= 0 && id < size()) out.push_back(int32_t(id));
    const int32_t n = int32_t(std::min<int64_t>(size(), vocab.size()));
    std::vector<int32_t> exact, spaced, containing;
    const QString withSpace = QLatin1Char(' ') + q;
    for (int32_t v = 0; v < n; ++v) {
        const QString& t = vocab.text[size_t(v)];
        if (t == q) exact.push_back(v);
        else if (t == withSpace) spaced.push_back(v);
        else if (t.contains(q, Qt::CaseInsensitive)) containing.push_back(v);
    }
    for (auto* group : {&exact, &spaced, &containing}) {
        std::sort(group->begin(), group->end(), [&](int32_t a, int32_t b) { return rankOf(a) < rankOf(b); });
        for (int32_t v : *group) {
            if (int(out.size()) >= limit) return out;
            if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
        }
    }
    return out;
}

}  // namespace strata::ui
