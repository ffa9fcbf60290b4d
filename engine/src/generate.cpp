// Generation: the sampler (temperature, top-k, top-p, min-p), the Llama 3 chat template, end tokens, and the
// session that owns the KV cache.
#include "strata/generate.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "strata/error.hpp"

namespace strata {

// ---------------------------------------------------------------------------------------------- sampling

namespace {

// Boundaries are compared with a little slack so that a distribution of exact fractions keeps the tokens its
// fractions say: top-p sums doubles (rounding ~1e-16 per term); min-p multiplies by a float setting
// (0.3f is 0.30000001), so its threshold gets float-sized slack.
constexpr double kTopPSlack = 1e-12;
constexpr double kMinPSlack = 1e-6;

// The argmax, lowest id on ties; NaN never wins.
int32_t argmax(std::span<const float> logits) {
    int32_t best = -1;
    for (size_t i = 0; i < logits.size(); ++i) {
        if (std::isnan(logits[i])) continue;
        if (best < 0 || logits[i] > logits[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
    }
    return best < 0 ? 0 : best;
}

double as_logit(float x) { return std::isnan(x) ? -std::numeric_limits<double>::infinity() : double(x); }

}  // namespace

// Applied in the order of Hugging Face transformers' logits warpers: temperature, then top-k, then top-p
// over the renormalised top-k, then min-p over what top-p kept. top-k keeps exactly k tokens (ties at the
// k-th value go to the lower id, as the backends' top-k does).
std::vector<float> sampling_distribution(std::span<const float> logits, const SamplerSettings& s) {
    const size_t n = logits.size();
    std::vector<float> out(n, 0.0f);
    if (n == 0) return out;
    if (!(s.temperature > 0.0f)) {
        out[static_cast<size_t>(argmax(logits))] = 1.0f;
        return out;
    }
    const double temperature = s.temperature;
    std::vector<int32_t> kept(n);  // candidate ids
    std::iota(kept.begin(), kept.end(), 0);
    auto higher = [&](int32_t a, int32_t b) {
        const double la = as_logit(logits[size_t(a)]), lb = as_logit(logits[size_t(b)]);
        return la != lb ? la > lb : a < b;
    };
    // top-k
    if (s.top_k > 0 && static_cast<size_t>(s.top_k) < n) {
        std::nth_element(kept.begin(), kept.begin() + s.top_k - 1, kept.end(), higher);
        kept.resize(static_cast<size_t>(s.top_k));
    }
    // softmax(logits / temperature) over the candidates, in double
    double mx = -std::numeric_limits<double>::infinity();
    for (int32_t id : kept) mx = std::max(mx, as_logit(logits[size_t(id)]) / temperature);
    if (!std::isfinite(mx)) {  // every candidate is -inf or NaN: nothing to prefer
        out[static_cast<size_t>(argmax(logits))] = 1.0f;
        return out;
    }
    std::vector<double> p(n, 0.0);
    double sum = 0;
    for (int32_t id : kept) sum += (p[size_t(id)] = std::exp(as_logit(logits[size_t(id)]) / temperature - mx));
    for (int32_t id : kept) p[size_t(id)] /= sum;
    // top-p: the smallest set of most probable tokens whose mass reaches top_p
    if (s.top_p < 1.0f) {
        auto more_probable = [&](int32_t a, int32_t b) {
            return p[size_t(a)] != p[size_t(b)] ? p[size_t(a)] > p[size_t(b)] : a < b;
        };
        // Only the head of the distribution needs sorting: if the tokens with p >= tau already hold top_p of
        // the mass, the kept prefix lies among them. Lower tau until they do (tau = 0 sorts everything).
        double pmax = 0;
        for (int32_t id : kept) pmax = std::max(pmax, p[size_t(id)]);
        auto head_end = kept.end();
        for (double tau = pmax * 1e-3;; tau *= 1e-3) {
            if (tau < 1e-300) tau = 0;
            double head_mass = 0;
            head_end = std::partition(kept.begin(), kept.end(), [&](int32_t id) { return p[size_t(id)] >= tau; });
            for (auto it = kept.begin(); it != head_end; ++it) head_mass += p[size_t(*it)];
            if (head_mass >= double(s.top_p) - kTopPSlack || tau == 0) break;
        }
        std::sort(kept.begin(), head_end, more_probable);
        double cum = 0;
        size_t keep = 0;
        const auto head = static_cast<size_t>(head_end - kept.begin());
        while (keep < head) {
            cum += p[size_t(kept[keep])];
            ++keep;
            if (cum >= double(s.top_p) - kTopPSlack) break;
        }
        for (size_t i = keep; i < kept.size(); ++i) p[size_t(kept[i])] = 0.0;
        kept.resize(keep);
        double mass = 0;
        for (int32_t id : kept) mass += p[size_t(id)];
        for (int32_t id : kept) p[size_t(id)] /= mass;
    }
    // min-p: drop tokens less probable than min_p times the most probable one
    if (s.min_p > 0.0f) {
        double pmax = 0;
        for (int32_t id : kept) pmax = std::max(pmax, p[size_t(id)]);
        const double threshold = double(s.min_p) * pmax * (1.0 - kMinPSlack);
        double mass = 0;
        for (int32_t id : kept) {
            if (p[size_t(id)] < threshold) p[size_t(id)] = 0.0;
            mass += p[size_t(id)];
        }
        for (int32_t id : kept) p[size_t(id)] /= mass;
    }
    for (int32_t id : kept) out[size_t(id)] = static_cast<float>(p[size_t(id)]);
    return out;
}

Sampler::Sampler(SamplerSettings s) : settings_(s), rng_(s.seed) {}

int32_t Sampler::sample(std::span<const float> logits) {
    if (logits.empty()) throw InputError("sampler: no logits to sample from");
    if (!(settings_.temperature > 0.0f)) return argmax(logits);
    const std::vector<float> p = sampling_distribution(logits, settings_);
    // 53 random bits as a double in [0, 1): the same stream of choices for a seed on every platform
    // (std::uniform_real_distribution is implementation-defined).
    const double u = double(rng_() >> 11) * 0x1.0p-53;
    double total = 0;
    for (float x : p) total += x;
    double cum = 0;
    int32_t last = -1;
    for (size_t i = 0; i < p.size(); ++i) {
        if (p[i] <= 0.0f) continue;
        cum += p[i];
        last = static_cast<int32_t>(i);
        if (u * total < cum) return last;
    }
    return last < 0 ? argmax(logits) : last;
}

// ---------------------------------------------------------------------------------------------- chat

namespace {

int32_t special(const Tokenizer& tok, const char* text) {
    auto id = tok.special_id(text);
    if (!id) throw TokenizerError(std::string("the tokenizer has no ") + text + " token (not a Llama 3 tokenizer?)");
    return *id;
}

// Python's str.strip() for the whitespace a message is likely to carry.
std::string_view strip(std::string_view s) {
    const char* ws = " \t\n\r\f\v";
    const auto b = s.find_first_not_of(ws);
    if (b == std::string_view::npos) return {};
    return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

}  // namespace

// Meta's ChatFormat (llama/tokenizer.py): encode_header is <|start_header_id|> role <|end_header_id|> "\n\n";
// encode_message adds the stripped content and <|eot_id|>; a dialog starts with <|begin_of_text|> and ends
// with an empty assistant header for the model to complete. Text is always encoded as plain text.
std::vector<int32_t> chat_tokens(const Tokenizer& tok, const std::vector<ChatMessage>& messages,
                                 bool add_generation_prompt) {
    const int32_t begin_of_text = special(tok, "<|begin_of_text|>");
    const int32_t start_header = special(tok, "<|start_header_id|>");
    const int32_t end_header = special(tok, "<|end_header_id|>");
    const int32_t eot = special(tok, "<|eot_id|>");
    std::vector<int32_t> ids{begin_of_text};
    auto append = [&](const std::vector<int32_t>& v) { ids.insert(ids.end(), v.begin(), v.end()); };
    auto header = [&](const std::string& role) {
        ids.push_back(start_header);
        append(tok.encode(role));
        ids.push_back(end_header);
        append(tok.encode("\n\n"));
    };
    for (const ChatMessage& m : messages) {
        header(m.role);
        append(tok.encode(strip(m.content)));
        ids.push_back(eot);
    }
    if (add_generation_prompt) header("assistant");
    return ids;
}

std::vector<int32_t> stop_ids(const Model& model) {
    std::vector<int32_t> ids = model.config.eos_ids;
    for (const char* s : {"<|eot_id|>", "<|end_of_text|>", "<|eom_id|>"})
        if (auto id = model.tokenizer.special_id(s)) ids.push_back(*id);
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    return ids;
}

std::string_view stop_reason_name(StopReason r) {
    switch (r) {
        case StopReason::EndToken: return "end_token";
        case StopReason::MaxTokens: return "max_tokens";
        case StopReason::Cancelled: return "cancelled";
        case StopReason::ContextFull: return "context_full";
    }
    return "unknown";
}

// ---------------------------------------------------------------------------------------------- session

namespace {
int64_t default_context(const ModelConfig& c, int64_t max_seq) {
    return max_seq > 0 ? max_seq : std::min<int64_t>(c.max_seq_len, 8192);
}
}  // namespace

Session::Session(const Model& model, Backend& backend, int64_t max_seq, KvCacheType kv_cache)
    : model_(&model), transformer_(model, backend),
      cache_(backend, model.config, default_context(model.config, max_seq), kv_cache) {}

Trace Session::feed(std::span<const int32_t> tokens, const TraceRequest& request, const std::atomic<bool>* cancel) {
    Trace t = transformer_.prefill(cache_, tokens, request, cancel);
    tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
    last_logits_ = t.last_logits;
    return t;
}

// Each emitted token is run through the model at once, so the cache always holds every token the caller has
// seen (a chat can go on from it) and the next token's logits are ready. An end token is not fed.
StopReason Session::generate(const GenerateOptions& options,
                             const std::function<bool(const GeneratedToken&)>& on_token,
                             const std::atomic<bool>* cancel) {
    if (last_logits_.empty()) throw InputError("nothing to continue: feed a prompt before generating");
    Sampler sampler(options.sampler);
    const std::vector<int32_t> stops = stop_ids(*model_);
    StreamDecoder decoder(model_->tokenizer);
    for (int64_t i = 0; i < options.max_tokens; ++i) {
        if (cancel && cancel->load()) return StopReason::Cancelled;
        if (static_cast<int64_t>(tokens_.size()) >= cache_.capacity()) return StopReason::ContextFull;
        const int32_t id = sampler.sample(last_logits_);
        if (std::binary_search(stops.begin(), stops.end(), id)) return StopReason::EndToken;
        GeneratedToken g;
        g.id = id;
        g.position = static_cast<int64_t>(tokens_.size());
        g.trace = transformer_.decode(cache_, id, options.trace);
        tokens_.push_back(id);
        last_logits_ = g.trace.last_logits;
        g.text = decoder.push(id);
        if (on_token && !on_token(g)) return StopReason::Cancelled;
    }
    return StopReason::MaxTokens;
}

void Session::truncate(int64_t n) {
    n = std::clamp<int64_t>(n, 0, static_cast<int64_t>(tokens_.size()));
    if (n == static_cast<int64_t>(tokens_.size())) return;
    if (n == 0) {
        cache_.truncate(0);
        tokens_.clear();
        last_logits_.clear();
        return;
    }
    // Generation continues from the logits after token n-1: run that token again (one decode step) rather
    // than keep logits for every position.
    const int32_t last = tokens_[static_cast<size_t>(n - 1)];
    cache_.truncate(n - 1);
    tokens_.resize(static_cast<size_t>(n - 1));
    TraceRequest cheap;
    cheap.residuals = false;
    cheap.top_k = 0;
    feed(std::span<const int32_t>(&last, 1), cheap);
}

}  // namespace strata
