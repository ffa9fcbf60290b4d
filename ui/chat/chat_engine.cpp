#include "chat/chat_engine.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "strata/error.hpp"
#include "strata/generate.hpp"
#include "strata/intervention.hpp"
#include "strata/model.hpp"
#include "strata/tokenizer.hpp"
#include "worker/analysis.hpp"
#include "worker/token_text.hpp"

namespace strata::ui {

namespace {

using Clock = std::chrono::steady_clock;
double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// What generation keeps of each step: the cheap trace (x0, h.N, norm of the one new row) and the top-k.
TraceRequest stepRequest() {
    TraceRequest r;
    r.residuals = true;
    r.top_k = kChatTopK;
    return r;
}

// The cheap record of the step that chooses the next token: its residual norms and top-k.
struct StepRecord {
    std::vector<float> residualNorms;  // [n_layers + 1]
    std::vector<TokenScore> top;
};

float lastRowNorm(const Trace& trace, const std::string& name) {
    const TracedTensor* t = trace.find(name);
    if (!t || t->rows == 0) return std::nanf("");
    const float* row = t->data.data() + (t->rows - 1) * t->cols;  // [dim]
    double ss = 0;
    for (int64_t j = 0; j < t->cols; ++j) ss += double(row[j]) * row[j];
    return float(std::sqrt(ss));
}

StepRecord record(const Trace& trace, int64_t nLayers) {
    StepRecord r;
    r.residualNorms.push_back(lastRowNorm(trace, "x0"));
    for (int64_t l = 0; l < nLayers; ++l) r.residualNorms.push_back(lastRowNorm(trace, "h." + std::to_string(l)));
    if (!trace.top_k.empty()) r.top = trace.top_k.back();
    return r;
}

// 0 for the most likely token; ties go to the lower id, as the sampler's argmax does.
int64_t rankOf(std::span<const float> logits, int32_t id) {
    const float l = logits[size_t(id)];
    int64_t rank = 0;
    for (size_t v = 0; v < logits.size(); ++v)
        if (logits[v] > l || (logits[v] == l && int32_t(v) < id)) ++rank;
    return rank;
}

}  // namespace

QString Vocabulary::displayOf(int32_t id) const {
    if (id < 0 || id >= size()) return QStringLiteral("<%1>").arg(id);
    return display[size_t(id)];
}

VocabularyPtr makeVocabulary(const Tokenizer& tokenizer) {
    auto v = std::make_shared<Vocabulary>();
    const int32_t n = tokenizer.vocab_size();
    v->display.reserve(size_t(n));
    v->text.reserve(size_t(n));
    v->special.reserve(size_t(n));
    for (int32_t id = 0; id < n; ++id) {
        v->display.push_back(displayToken(tokenizer, id));
        QString text;
        try {
            text = QString::fromStdString(to_valid_utf8(tokenizer.token_bytes(id)));
        } catch (const std::exception&) {
        }
        v->text.push_back(text);
        v->special.push_back(tokenizer.is_special(id));
    }
    return v;
}

ChatEngine::ChatEngine(const Model& model, Backend& backend) : model_(&model), backend_(&backend) {}

ChatEngine::~ChatEngine() = default;

int64_t ChatEngine::defaultContext(const ModelConfig& config) { return std::min(config.max_seq_len, kChatMaxContext); }

std::vector<int32_t> ChatEngine::promptTokens(const Model& model, const ChatRequest& request) {
    if (request.mode == ChatMode::Chat) return chat_tokens(model.tokenizer, request.messages, true);
    std::vector<int32_t> ids{model.config.bos_id};
    const std::vector<int32_t> text = model.tokenizer.encode(request.document);
    ids.insert(ids.end(), text.begin(), text.end());
    return ids;
}

std::vector<int32_t> ChatEngine::cacheTokens() const { return session_ ? session_->tokens() : std::vector<int32_t>{}; }

int64_t ChatEngine::contextLength() const { return session_ ? session_->capacity() : defaultContext(model_->config); }

VocabularyPtr ChatEngine::vocabulary() {
    if (!vocab_) vocab_ = makeVocabulary(model_->tokenizer);
    return vocab_;
}

void ChatEngine::ensureSession(int64_t contextLength, KvCacheType kvCache) {
    if (session_ && session_->capacity() == contextLength && session_->kv_cache_type() == kvCache) return;
    session_.reset();  // frees the old cache before allocating the new one
    session_ = std::make_unique<Session>(*model_, *backend_, contextLength, kvCache);
}

ChatOutcome ChatEngine::generate(const ChatRequest& request, const Callbacks& callbacks) {
    ChatOutcome out;
    const std::atomic<bool>* stop = request.stop.get();
    try {
        const int64_t context = request.contextLength > 0 ? request.contextLength : defaultContext(model_->config);
        const std::vector<int32_t> prompt = promptTokens(*model_, request);
        const int64_t T = int64_t(prompt.size());
        out.contextLength = context;
        // The reply needs at least one free position after the prompt.
        if (T + 1 > context) {
            out.doesNotFit = true;
            out.error = QStringLiteral(
                            "This message does not fit: with it the conversation takes %1 tokens, and the context "
                            "holds %2 (the reply needs at least one more). Shorten the message, clear the "
                            "conversation or raise the context length.")
                            .arg(T)
                            .arg(context);
            out.cacheTokens = cacheTokens();
            return out;
        }
        ensureSession(context, request.kvCacheF16 ? KvCacheType::F16 : KvCacheType::F32);
        // The ablations ride in every step's trace request; a cache computed under other ones is not reused.
        Interventions interventions;
        for (const std::string& spec : request.ablations)
            for (Intervention& iv : parse_ablation(spec, model_->config)) interventions.push_back(std::move(iv));
        if (request.ablations != cacheAblations_) session_->truncate(0);
        cacheAblations_ = request.ablations;

        // Keep the common prefix, but always feed the prompt's last token anew: its step chooses the first
        // token of the reply, and its trace gives that token's residual norms and top-k.
        const std::vector<int32_t>& cached = session_->tokens();
        int64_t common = 0;
        while (common < int64_t(cached.size()) && common < T && cached[size_t(common)] == prompt[size_t(common)]) ++common;
        const int64_t keep = std::min(common, T - 1);
        const auto prefillStart = Clock::now();
        session_->truncate(keep);
        if (T - 1 > keep) {
            TraceRequest cheap;
            cheap.residuals = false;
            cheap.top_k = 0;
            cheap.interventions = interventions;
            session_->feed(std::span<const int32_t>(prompt).subspan(size_t(keep), size_t(T - 1 - keep)), cheap, stop);
        }
        TraceRequest lastRequest = stepRequest();
        lastRequest.interventions = interventions;
        const Trace last = session_->feed(std::span<const int32_t>(prompt).subspan(size_t(T - 1), 1), lastRequest, stop);

        ChatStart start;
        start.promptTokens = prompt;
        start.reusedTokens = keep;
        start.contextLength = context;
        start.kvCacheF16 = request.kvCacheF16;
        start.prefillSeconds = secondsSince(prefillStart);
        start.vocab = vocabulary();
        if (callbacks.started) callbacks.started(start);

        const int64_t nLayers = model_->config.n_layers;
        std::vector<float> logits = session_->last_logits();  // [vocab] of the step that chooses the next token
        StepRecord chooser = record(last, nLayers);
        StreamDecoder decoder(model_->tokenizer);
        GenerateOptions options;
        options.max_tokens = request.maxTokens;
        options.sampler = request.sampler;
        options.trace = stepRequest();
        options.trace.interventions = interventions;
        const auto decodeStart = Clock::now();
        int index = 0;
        out.stop = session_->generate(
            options,
            [&](const GeneratedToken& g) {
                ChatToken t;
                t.id = g.id;
                t.index = index++;
                t.position = g.position;
                t.text = QString::fromStdString(decoder.push(g.id));
                const analysis::LogitStats stats = analysis::logit_stats(logits);
                t.logit = logits[size_t(g.id)];
                t.prob = std::exp(double(t.logit) - stats.log_sum_exp);
                t.rank = rankOf(logits, g.id);
                t.entropy = stats.entropy;
                t.top = chooser.top;
                for (const TokenScore& s : t.top) t.topProb.push_back(std::exp(double(s.logit) - stats.log_sum_exp));
                t.residualNorms = chooser.residualNorms;
                t.decodeSeconds = secondsSince(decodeStart);
                t.contextUsed = g.position + 1;
                out.generated = index;
                out.decodeSeconds = t.decodeSeconds;
                if (callbacks.token) callbacks.token(t);
                logits = g.trace.last_logits;
                chooser = record(g.trace, nLayers);
                return !(stop && stop->load());
            },
            stop);
        // Bytes of a character the reply never finished: shown as U+FFFD rather than dropped.
        out.tail = QString::fromStdString(decoder.flush());
    } catch (const Cancelled&) {
        out.stop = StopReason::Cancelled;
    } catch (const std::exception& e) {
        out.error = QString::fromUtf8(e.what());
    }
    if (out.generated > 0 && out.decodeSeconds > 0) out.tokensPerSecond = out.generated / out.decodeSeconds;
    out.cacheTokens = cacheTokens();
    return out;
}

}  // namespace strata::ui
