#pragma once
// The value types of the chat and the logits explorer that travel between the engine worker and the GUI thread.
// Plain copyable values (or shared pointers to immutable ones): the GUI never touches the engine's objects.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <QMetaType>
#include <QString>

#include "strata/backend.hpp"
#include "strata/generate.hpp"

namespace strata::ui {

// The text of every token id, made once per model on the worker: the GUI thread has no tokenizer, yet the logits
// explorer shows and searches any token of the vocabulary.
struct Vocabulary {
    std::vector<QString> display;  // whitespace made visible, incomplete UTF-8 as <0xAB> (displayToken)
    std::vector<QString> text;     // the token's bytes as text (incomplete UTF-8 as U+FFFD), for search
    std::vector<bool> special;     // <|eot_id|> and the other 255 special tokens

    int32_t size() const { return int32_t(display.size()); }
    // The display text, or "<id>" for an id outside the vocabulary.
    QString displayOf(int32_t id) const;
};
using VocabularyPtr = std::shared_ptr<const Vocabulary>;

// Instruct models converse through the Llama 3 template; base models (and anyone who asks) continue a document.
enum class ChatMode { Chat, Completion };

// What a reply is generated with; persisted with QSettings by the chat panel (chat_settings.hpp).
struct ChatSettings {
    SamplerSettings sampler{0.7f, 0, 0.9f, 0.0f, 0};  // temperature, top_k, top_p, min_p, seed
    int64_t maxTokens = 256;
    int64_t contextLength = 0;  // 0: the model's, at most kChatMaxContext
    bool kvCacheF16 = false;    // the KV cache in binary16: half the memory, each key and value rounded once
};

// The longest context the chat allocates a KV cache for unless told otherwise (Llama 3.1's 131072 would need
// 16 GiB of cache for an 8B model).
constexpr int64_t kChatMaxContext = 8192;
// How many of the choosing step's most likely tokens each generated token keeps.
constexpr int64_t kChatTopK = 20;

// One reply to generate.
struct ChatRequest {
    ChatMode mode = ChatMode::Chat;
    std::vector<ChatMessage> messages;  // Chat: an optional system message, then user / assistant turns
    std::string document;               // Completion: the whole text so far
    SamplerSettings sampler;
    int64_t maxTokens = 256;
    int64_t contextLength = 0;          // 0: ChatEngine::defaultContext
    bool kvCacheF16 = false;            // the KV cache in binary16 (ChatSettings::kvCacheF16)
    // Zero-ablation specs (intervention.hpp) in force for the whole reply, prompt included. A change of them
    // invalidates the KV cache (it was computed without them).
    std::vector<std::string> ablations;
    // Set by the GUI (Stop); checked between tokens and between the layers of the prefill.
    std::shared_ptr<std::atomic<bool>> stop = std::make_shared<std::atomic<bool>>(false);
};

// The prompt is in the KV cache: what was reused from the previous turn and what had to be fed.
struct ChatStart {
    std::vector<int32_t> promptTokens;  // the whole sequence the reply continues (template applied)
    int64_t reusedTokens = 0;           // positions kept in the KV cache from before
    int64_t contextLength = 0;
    bool kvCacheF16 = false;            // the cache the reply runs on holds binary16
    double prefillSeconds = 0.0;
    VocabularyPtr vocab;
};

// One generated token, with what is cheap to keep about the step that chose it: the forward pass at
// position - 1, whose logits it was sampled from. The rest is recomputed when the token is opened.
struct ChatToken {
    int32_t id = 0;
    int index = 0;                      // 0-based within the reply
    int64_t position = 0;               // its position in the sequence
    QString text;                       // complete UTF-8 released by this token (empty while a character is split)
    float logit = 0.0f;
    double prob = 0.0;                  // softmax(logits)[id] at the choosing step, before the sampling settings
    int64_t rank = 0;                   // 0 = the most likely token
    double entropy = 0.0;               // of the choosing step's distribution, nats
    std::vector<TokenScore> top;        // the choosing step's top-k (kChatTopK)
    std::vector<double> topProb;        // their probabilities
    std::vector<float> residualNorms;   // [n_layers + 1]: ||x0||, ||h.0|| .. ||h.{L-1}|| at position - 1
    double decodeSeconds = 0.0;         // since the prompt was in the cache
    int64_t contextUsed = 0;            // positions in the KV cache after this token
};

struct ChatOutcome {
    StopReason stop = StopReason::EndToken;
    QString error;                      // non-empty: nothing was generated, the reason for a person
    bool doesNotFit = false;            // the prompt is longer than the context allows
    std::vector<int32_t> cacheTokens;   // what the KV cache holds afterwards
    int64_t contextLength = 0;
    int generated = 0;
    QString tail;                       // bytes of a character the reply left unfinished, as U+FFFD
    double decodeSeconds = 0.0;
    double tokensPerSecond = 0.0;       // generated / decodeSeconds
};

using ChatRequestPtr = std::shared_ptr<const ChatRequest>;
using ChatStartPtr = std::shared_ptr<const ChatStart>;
using ChatTokenPtr = std::shared_ptr<const ChatToken>;
using ChatOutcomePtr = std::shared_ptr<const ChatOutcome>;

// The logits of one position of an explorer run, and on request the logit lens there.
struct PositionLogits {
    qint64 id = 0;
    qint64 runId = 0;
    int position = 0;
    std::vector<float> logits;          // [vocab] the model's logits at the position
    // With the lens: every residual (x0, h.0 .. h.{L-1}) at the position through the final norm and output.
    int64_t lensRows = 0;               // n_layers + 1, or 0 without the lens
    std::vector<float> lens;            // [lensRows, vocab]
    VocabularyPtr vocab;
};
using PositionLogitsPtr = std::shared_ptr<const PositionLogits>;

// Registers the types above for queued connections (call before connecting to the worker's chat signals).
void registerChatTypes();

}  // namespace strata::ui

Q_DECLARE_METATYPE(strata::ui::ChatStartPtr)
Q_DECLARE_METATYPE(strata::ui::ChatTokenPtr)
Q_DECLARE_METATYPE(strata::ui::ChatOutcomePtr)
Q_DECLARE_METATYPE(strata::ui::PositionLogitsPtr)
