#include "strata/config.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "strata/error.hpp"

namespace strata {

namespace {

// Bounds that keep every product of sizes (vocab * dim, n_layers * hidden_dim * dim, ...) far from int64
// overflow while covering every Llama 3 model (405B: dim 16384, 126 layers, FFN 53248).
constexpr int64_t kMaxDim = int64_t(1) << 20;
constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxVocab = int64_t(1) << 24;

// A float as the decimal it was written as (1e-05, not 9.999999747378752e-06): the shortest text that reads
// back to the same float, widened to double for JSON.
double json_float(float x) {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, x);
    return std::strtod(std::string(buf, r.ptr).c_str(), nullptr);
}

void check_range(const char* field, int64_t value, int64_t lo, int64_t hi, const std::string& model) {
    if (value < lo || value > hi)
        throw ModelError(model + ": " + field + " = " + std::to_string(value) + " is out of range [" +
                         std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

}  // namespace

void ModelConfig::validate() const {
    const std::string who = "model config" + (name.empty() ? std::string() : " of " + name);
    check_range("dim", dim, 1, kMaxDim, who);
    check_range("n_layers", n_layers, 1, kMaxLayers, who);
    check_range("n_heads", n_heads, 1, kMaxDim, who);
    check_range("n_kv_heads", n_kv_heads, 1, n_heads, who);
    check_range("head_dim", head_dim, 2, kMaxDim, who);
    check_range("hidden_dim", hidden_dim, 1, 8 * kMaxDim, who);
    check_range("vocab_size", vocab_size, 1, kMaxVocab, who);
    check_range("max_seq_len", max_seq_len, 1, int64_t(1) << 30, who);
    check_range("n_heads * head_dim", n_heads * head_dim, 1, 8 * kMaxDim, who);
    if (n_heads % n_kv_heads != 0)
        throw ModelError(who + ": n_heads " + std::to_string(n_heads) + " is not a multiple of n_kv_heads " +
                         std::to_string(n_kv_heads) + " (grouped-query attention shares each KV head by n_rep)");
    // RoPE rotates pairs of features inside each head.
    if (head_dim % 2 != 0) throw ModelError(who + ": head_dim " + std::to_string(head_dim) + " is odd");
    if (!(norm_eps > 0.0f) || !std::isfinite(norm_eps))
        throw ModelError(who + ": norm_eps " + std::to_string(norm_eps) + " must be a positive number");
    if (!(rope_theta > 0.0f) || !std::isfinite(rope_theta))
        throw ModelError(who + ": rope_theta " + std::to_string(rope_theta) + " must be a positive number");
    if (rope_scaling.enabled) {
        const RopeScaling& s = rope_scaling;
        if (!(s.factor > 0.0f) || !std::isfinite(s.factor) || !(s.low_freq_factor > 0.0f) ||
            !std::isfinite(s.high_freq_factor) || !(s.high_freq_factor > s.low_freq_factor) ||
            s.original_max_position_embeddings <= 0)
            throw ModelError(who + ": rope_scaling needs factor > 0, 0 < low_freq_factor < high_freq_factor and "
                             "original_max_position_embeddings > 0 (found factor " + std::to_string(s.factor) +
                             ", low " + std::to_string(s.low_freq_factor) + ", high " +
                             std::to_string(s.high_freq_factor) + ", original " +
                             std::to_string(s.original_max_position_embeddings) + ")");
    }
    if (bos_id < 0 || bos_id >= vocab_size)
        throw ModelError(who + ": bos id " + std::to_string(bos_id) + " is outside the vocabulary of " +
                         std::to_string(vocab_size));
    for (int32_t e : eos_ids)
        if (e < 0 || e >= vocab_size)
            throw ModelError(who + ": eos id " + std::to_string(e) + " is outside the vocabulary of " +
                             std::to_string(vocab_size));
}

int64_t meta_hidden_dim(int64_t dim, int64_t multiple_of, double ffn_dim_multiplier) {
    // model.py FeedForward: hidden_dim = 4 * dim; int(2 * hidden_dim / 3); custom multiplier; round up.
    int64_t hidden = static_cast<int64_t>(2.0 * static_cast<double>(4 * dim) / 3.0);
    if (ffn_dim_multiplier > 0.0) hidden = static_cast<int64_t>(ffn_dim_multiplier * static_cast<double>(hidden));
    if (multiple_of <= 0) return hidden;
    return multiple_of * ((hidden + multiple_of - 1) / multiple_of);
}

void to_json(nlohmann::json& j, const ModelConfig& c) {
    j = nlohmann::json{
        {"name", c.name},
        {"dim", c.dim},
        {"n_layers", c.n_layers},
        {"n_heads", c.n_heads},
        {"n_kv_heads", c.n_kv_heads},
        {"head_dim", c.head_dim},
        {"hidden_dim", c.hidden_dim},
        {"vocab_size", c.vocab_size},
        {"norm_eps", json_float(c.norm_eps)},
        {"rope_theta", json_float(c.rope_theta)},
        {"rope_scaling",
         c.rope_scaling.enabled
             ? nlohmann::json{{"factor", json_float(c.rope_scaling.factor)},
                              {"low_freq_factor", json_float(c.rope_scaling.low_freq_factor)},
                              {"high_freq_factor", json_float(c.rope_scaling.high_freq_factor)},
                              {"original_max_position_embeddings", c.rope_scaling.original_max_position_embeddings}}
             : nlohmann::json(nullptr)},
        {"tie_embeddings", c.tie_embeddings},
        {"max_seq_len", c.max_seq_len},
        {"bos_id", c.bos_id},
        {"eos_ids", c.eos_ids},
        {"is_demo", c.is_demo},
        {"demo_trained", c.demo_trained},
        {"is_instruct", c.is_instruct},
    };
}

}  // namespace strata
