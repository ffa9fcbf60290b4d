#pragma once
// One position's next-token distribution as the logits explorer shows it: the tokens by rank, softmax
// probabilities and their running sum, entropy and perplexity, and the same distribution after the sampling
// settings (strata::sampling_distribution, exactly what the sampler draws from) with the tokens that survive.
// No widgets: the table, the plots and the tests all read it.
#include <cstdint>
#include <vector>

#include <QString>

#include "chat/chat_types.hpp"
#include "strata/generate.hpp"

namespace strata::ui {

class LogitsDistribution {
public:
    LogitsDistribution() = default;
    explicit LogitsDistribution(std::vector<float> logits, const SamplerSettings& sampling = {1.0f, 0, 1.0f, 0.0f, 0});

    // [vocab]; recomputes the ranks, probabilities and the sampled distribution.
    void setLogits(std::vector<float> logits);
    // Recomputes only the sampled distribution (the ranks do not change).
    void setSampling(const SamplerSettings& sampling);
    const SamplerSettings& sampling() const { return sampling_; }

    bool empty() const { return logits_.empty(); }
    int64_t size() const { return int64_t(logits_.size()); }
    const std::vector<float>& logits() const { return logits_; }

    int32_t idAt(int64_t rank) const { return order_[size_t(rank)]; }  // rank 0 = highest logit (ties: lower id)
    int64_t rankOf(int32_t id) const { return rank_[size_t(id)]; }
    float logit(int32_t id) const { return logits_[size_t(id)]; }
    double prob(int32_t id) const { return prob_[size_t(id)]; }          // softmax(logits)
    double cumulative(int64_t rank) const { return cumulative_[size_t(rank)]; }  // mass of ranks 0..rank
    double entropy() const { return entropy_; }                          // nats
    double perplexity() const;                                           // exp(entropy)

    double sampledProb(int32_t id) const { return sampled_[size_t(id)]; }
    bool survives(int32_t id) const { return sampled_[size_t(id)] > 0.0f; }
    int64_t survivors() const { return survivors_; }
    double survivingMass() const { return survivingMass_; }  // softmax mass (before the settings) of the survivors
    double sampledEntropy() const { return sampledEntropy_; }
    double sampledPerplexity() const;

    // Tokens matching `query`: "123" or "#123" is an id; otherwise the token text exactly, then with a leading
    // space, then tokens containing it (case-insensitive). Each group most likely first; at most `limit`.
    std::vector<int32_t> find(const QString& query, const Vocabulary& vocab, int limit = 50) const;

private:
    std::vector<float> logits_;      // [vocab]
    std::vector<int32_t> order_;     // [vocab] ids by rank
    std::vector<int64_t> rank_;      // [vocab] rank of each id
    std::vector<double> prob_;       // [vocab]
    std::vector<double> cumulative_; // [vocab] by rank
    double entropy_ = 0.0;
    SamplerSettings sampling_{1.0f, 0, 1.0f, 0.0f, 0};
    std::vector<float> sampled_;     // [vocab]
    int64_t survivors_ = 0;
    double survivingMass_ = 0.0;
    double sampledEntropy_ = 0.0;
};

}  // namespace strata::ui
