#pragma once
// Generation: a session owns the KV cache and a sampler; chat uses the Llama 3 instruct template.
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "strata/transformer.hpp"

namespace strata {

struct SamplerSettings {
    float temperature = 0.0f;  // 0 = greedy (argmax)
    int64_t top_k = 0;         // 0 = off
    float top_p = 1.0f;        // 1 = off
    float min_p = 0.0f;        // 0 = off
    uint64_t seed = 0;
};

// The distribution after temperature, top-k, top-p and min-p, as the sampler sees it. Tokens removed by a
// filter have probability 0. Greedy (temperature 0) puts all mass on the argmax (lowest id on ties).
// Order and rules follow Hugging Face transformers' warpers: softmax(logits / temperature); top-k keeps
// exactly k tokens (ties to the lower id); top-p keeps the smallest most-probable set whose renormalised mass
// reaches top_p; min-p then drops tokens below min_p * (largest remaining probability); the rest renormalised.
std::vector<float> sampling_distribution(std::span<const float> logits, const SamplerSettings& s);

class Sampler {
public:
    explicit Sampler(SamplerSettings s);
    int32_t sample(std::span<const float> logits);
    const SamplerSettings& settings() const { return settings_; }

private:
    SamplerSettings settings_;
    std::mt19937_64 rng_;
};

struct ChatMessage {
    std::string role;     // "system", "user", "assistant"
    std::string content;
};

// The Llama 3 instruct template: <|begin_of_text|> then per message
// <|start_header_id|>role<|end_header_id|>\n\n content <|eot_id|>, then the assistant header to generate after.
// Special tokens come from the template only; message text is encoded as plain text.
std::vector<int32_t> chat_tokens(const Tokenizer& tok, const std::vector<ChatMessage>& messages,
                                 bool add_generation_prompt = true);

// The ids that end generation: the configured eos ids plus <|eot_id|>, <|end_of_text|>, <|eom_id|>.
std::vector<int32_t> stop_ids(const Model& model);

struct GenerateOptions {
    int64_t max_tokens = 128;
    SamplerSettings sampler;
    TraceRequest trace;  // what to keep for each generated token (cheap default)
};

enum class StopReason { EndToken, MaxTokens, Cancelled, ContextFull };
std::string_view stop_reason_name(StopReason r);

struct GeneratedToken {
    int32_t id = 0;
    std::string text;          // complete UTF-8 released by this token (may be empty)
    int64_t position = 0;      // its position in the sequence
    Trace trace;               // the decode step that ran this token (its residuals; top-k of the next token)
};

class Session {
public:
    Session(const Model& model, Backend& backend, int64_t max_seq = 0 /* 0: min(model's, 8192) */,
            KvCacheType kv_cache = KvCacheType::F32);

    // Feeds tokens (prefill) after what the session already holds; returns their trace.
    Trace feed(std::span<const int32_t> tokens, const TraceRequest& request = {},
               const std::atomic<bool>* cancel = nullptr);
    // Generates after what was fed, calling on_token for each token (return false to stop: Cancelled).
    // Stops on an end token (not emitted as text and not fed), max_tokens, cancel or a full context.
    // Each token is run through the model before on_token sees it, so tokens() holds every emitted token.
    StopReason generate(const GenerateOptions& options, const std::function<bool(const GeneratedToken&)>& on_token,
                        const std::atomic<bool>* cancel = nullptr);

    const std::vector<int32_t>& tokens() const { return tokens_; }  // every token in the cache
    // The logits after the last token in the cache ([vocab]; empty before the first feed).
    const std::vector<float>& last_logits() const { return last_logits_; }
    int64_t capacity() const { return cache_.capacity(); }
    KvCacheType kv_cache_type() const { return cache_.type(); }
    // Forget tokens >= n (regenerate, edit); generation then continues after token n-1 (re-run once).
    void truncate(int64_t n);
    Transformer& transformer() { return transformer_; }

private:
    const Model* model_;
    Transformer transformer_;
    KVCache cache_;
    std::vector<int32_t> tokens_;
    std::vector<float> last_logits_;
};

}  // namespace strata
