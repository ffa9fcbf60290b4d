#pragma once
// The chat on the engine's side: one generation Session (its KV cache) per loaded model, kept across turns.
// A reply feeds only what changed: the new prompt's tokens are compared with what the cache holds, the cache is
// truncated to the common prefix and the rest is fed (Session::truncate + Session::feed). Lives on the engine
// worker's thread, owned by EngineWorker and dropped before the model it refers to. No signals: the worker
// forwards the callbacks, so tests drive it directly.
#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "chat/chat_types.hpp"

namespace strata {
class Backend;
class Model;
class Session;
class Tokenizer;
struct ModelConfig;
}  // namespace strata

namespace strata::ui {

class ChatEngine {
public:
    ChatEngine(const Model& model, Backend& backend);
    ~ChatEngine();
    ChatEngine(const ChatEngine&) = delete;
    ChatEngine& operator=(const ChatEngine&) = delete;

    // min(the model's context, kChatMaxContext).
    static int64_t defaultContext(const ModelConfig& config);
    // The token sequence a request stands for: the Llama 3 instruct template over the messages with the
    // assistant header to complete (chat_tokens), or <|begin_of_text|> + the document (completion).
    static std::vector<int32_t> promptTokens(const Model& model, const ChatRequest& request);

    struct Callbacks {
        std::function<void(const ChatStart&)> started;  // the prompt is in the cache
        std::function<void(const ChatToken&)> token;    // each generated token, in order
    };
    // Generates one reply. Never throws for bad input or a cancel: the outcome says what happened, and the
    // cache always holds exactly outcome.cacheTokens (a stop between tokens keeps every token already seen).
    ChatOutcome generate(const ChatRequest& request, const Callbacks& callbacks);

    // What the KV cache holds (empty before the first reply).
    std::vector<int32_t> cacheTokens() const;
    int64_t contextLength() const;
    // The text of every token (made on first use).
    VocabularyPtr vocabulary();

private:
    void ensureSession(int64_t contextLength, KvCacheType kvCache);

    const Model* model_;
    Backend* backend_;
    std::unique_ptr<Session> session_;
    std::vector<std::string> cacheAblations_;  // what the KV cache was computed with
    VocabularyPtr vocab_;
};

// The vocabulary's display text (token_text.hpp) and plain text for every id.
VocabularyPtr makeVocabulary(const Tokenizer& tokenizer);

}  // namespace strata::ui
