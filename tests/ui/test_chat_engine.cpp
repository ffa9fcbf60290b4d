// The chat on the engine's side, with the demonstration model on the CPU: the Llama 3 template's exact tokens as
// the chat builds them, streamed replies and what each token keeps, the KV cache reused across turns, a stop in
// the middle of a reply, and a message too long for the context.
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "catch.hpp"
#include "chat/chat_engine.hpp"
#include "chat/conversation.hpp"
#include "strata/backend.hpp"
#include "strata/model.hpp"
#include "strata/tokenizer.hpp"
#include "ui_support.hpp"

using namespace strata;
using namespace strata::ui;

namespace {

struct Demo {
    std::unique_ptr<Model> model;
    std::unique_ptr<Backend> backend;  // declared after the model: released first
};

Demo& demo() {
    static Demo d = [] {
        Demo x;
        x.model = load_model(test::demo_model());
        BackendOptions o;
        o.name = "cpu";
        x.backend = make_backend(o);
        x.backend->load(*x.model);
        return x;
    }();
    return d;
}

ChatEntry reply(const QString& text) {
    ChatEntry e;
    e.role = QStringLiteral("assistant");
    e.content = text;
    return e;
}

ChatEntry user(const QString& text) {
    ChatEntry e;
    e.role = QStringLiteral("user");
    e.content = text;
    return e;
}

ChatSettings greedy(int64_t maxTokens) {
    ChatSettings s;
    s.sampler = SamplerSettings{0.0f, 0, 1.0f, 0.0f, 0};
    s.maxTokens = maxTokens;
    return s;
}

struct Run {
    ChatOutcome outcome;
    std::vector<ChatStart> starts;
    std::vector<ChatToken> tokens;
    std::vector<int32_t> ids() const {
        std::vector<int32_t> v;
        for (const ChatToken& t : tokens) v.push_back(t.id);
        return v;
    }
};

Run generate(ChatEngine& engine, const ChatRequest& request, int stopAfter = -1) {
    Run r;
    ChatEngine::Callbacks cb;
    cb.started = [&](const ChatStart& s) { r.starts.push_back(s); };
    cb.token = [&](const ChatToken& t) {
        r.tokens.push_back(t);
        if (int(r.tokens.size()) == stopAfter) request.stop->store(true);
    };
    r.outcome = engine.generate(request, cb);
    return r;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

}  // namespace

TEST_CASE("the chat builds the exact Llama 3 instruct tokens for system, user, assistant, user", "[chat]") {
    test::ui_app();
    Conversation c;
    c.setSystemPrompt(QStringLiteral("You are terse."));
    c.setEntries({user(QStringLiteral("Hi")), reply(QStringLiteral("Hello! How can I help?")), user(QStringLiteral("Bye"))});
    const std::vector<int32_t> ids = ChatEngine::promptTokens(*demo().model, c.request(greedy(8)));
    // <|begin_of_text|>, then per message <|start_header_id|> role <|end_header_id|> "\n\n" content <|eot_id|>,
    // then the assistant header to complete. system 9125, user 882, assistant 78191, "\n\n" 271.
    const std::vector<int32_t> expected = {
        128000,
        128006, 9125, 128007, 271, 2675, 527, 51637, 13, 128009,        // system: You are terse.
        128006, 882, 128007, 271, 13347, 128009,                         // user: Hi
        128006, 78191, 128007, 271, 9906, 0, 2650, 649, 358, 1520, 30, 128009,  // assistant: Hello! How can I help?
        128006, 882, 128007, 271, 1383, 68, 128009,                     // user: Bye
        128006, 78191, 128007, 271};
    CHECK(ids == expected);

    SECTION("no system message when the system prompt is empty") {
        c.setSystemPrompt(QStringLiteral("  "));
        const std::vector<int32_t> none = ChatEngine::promptTokens(*demo().model, c.request(greedy(8)));
        CHECK(none == concat({128000}, std::vector<int32_t>(expected.begin() + 10, expected.end())));
    }
    SECTION("special-token text in a message stays text") {
        c.setEntries({user(QStringLiteral("<|eot_id|>"))});
        const std::vector<int32_t> t = ChatEngine::promptTokens(*demo().model, c.request(greedy(8)));
        CHECK(std::count(t.begin(), t.end(), 128009) == 2);  // the system message's and the user message's ends
    }
    SECTION("completion mode is <|begin_of_text|> and the document") {
        c.setMode(ChatMode::Completion);
        c.setEntries({user(QStringLiteral("You are")), reply(QStringLiteral(" terse."))});
        CHECK(ChatEngine::promptTokens(*demo().model, c.request(greedy(8))) == std::vector<int32_t>{128000, 2675, 527, 51637, 13});
    }
}

TEST_CASE("a reply streams its tokens with what each step kept, and the cache holds prompt and reply", "[chat]") {
    ChatEngine engine(*demo().model, *demo().backend);
    Conversation c;
    c.setSystemPrompt(QStringLiteral("You are terse."));
    c.addUser(QStringLiteral("Name a colour."));
    const ChatRequest request = c.request(greedy(8));
    const Run r = generate(engine, request);
    REQUIRE(r.outcome.error.isEmpty());
    REQUIRE(r.starts.size() == 1);
    const std::vector<int32_t>& prompt = r.starts[0].promptTokens;
    CHECK(prompt == ChatEngine::promptTokens(*demo().model, request));
    CHECK(r.starts[0].reusedTokens == 0);
    CHECK(r.starts[0].contextLength == ChatEngine::defaultContext(demo().model->config));
    REQUIRE(r.starts[0].vocab);
    CHECK(r.starts[0].vocab->size() == demo().model->tokenizer.vocab_size());
    REQUIRE(!r.tokens.empty());
    CHECK(r.outcome.generated == int(r.tokens.size()));
    CHECK(r.outcome.cacheTokens == concat(prompt, r.ids()));
    CHECK(engine.cacheTokens() == r.outcome.cacheTokens);

    QString text;
    for (size_t i = 0; i < r.tokens.size(); ++i) {
        const ChatToken& t = r.tokens[i];
        INFO("token " << i);
        CHECK(t.index == int(i));
        CHECK(t.position == int64_t(prompt.size() + i));
        CHECK(t.contextUsed == t.position + 1);
        // Greedy: the chosen token is the step's most likely one, and its record says so.
        REQUIRE(t.top.size() == size_t(kChatTopK));
        CHECK(t.top[0].id == t.id);
        CHECK(t.rank == 0);
        CHECK(t.prob == Approx(t.topProb[0]).epsilon(1e-9));
        CHECK(t.prob > 0);
        CHECK(t.prob <= 1);
        for (size_t k = 1; k < t.top.size(); ++k) CHECK(t.topProb[k] <= t.topProb[k - 1]);
        CHECK(t.entropy > 0);
        REQUIRE(t.residualNorms.size() == size_t(demo().model->config.n_layers + 1));
        for (float n : t.residualNorms) CHECK((std::isfinite(n) && n > 0));
        text += t.text;
    }
    // Only complete UTF-8 was released; with the tail it is the whole reply.
    CHECK(text + r.outcome.tail == QString::fromStdString(to_valid_utf8(demo().model->tokenizer.decode(r.ids()))));
    CHECK(r.outcome.tokensPerSecond > 0);
}

TEST_CASE("the next turn reuses the KV cache and replies as a fresh session would", "[chat]") {
    ChatEngine engine(*demo().model, *demo().backend);
    Conversation c;
    c.setSystemPrompt(QStringLiteral("You are terse."));
    c.addUser(QStringLiteral("Name a colour."));
    const Run first = generate(engine, c.request(greedy(6)));
    REQUIRE(first.outcome.error.isEmpty());
    REQUIRE(!first.tokens.empty());
    // The reply goes into the conversation as its text; the template re-encodes it.
    c.beginReply(SamplerSettings{}, 0);
    c.setReplyPrompt(first.starts[0].promptTokens, 0);
    for (const ChatToken& t : first.tokens) c.appendToken(std::make_shared<const ChatToken>(t));
    c.finishReply(first.outcome, QStringLiteral("done"));
    c.addUser(QStringLiteral("Another."));
    const ChatRequest second = c.request(greedy(6));

    const Run reused = generate(engine, second);
    REQUIRE(reused.outcome.error.isEmpty());
    const std::vector<int32_t>& prompt1 = first.starts[0].promptTokens;
    CHECK(reused.starts[0].reusedTokens >= int64_t(prompt1.size()));
    CHECK(reused.starts[0].reusedTokens < int64_t(reused.starts[0].promptTokens.size()));

    ChatEngine fresh(*demo().model, *demo().backend);
    const Run anew = generate(fresh, second);
    CHECK(anew.starts[0].reusedTokens == 0);
    CHECK(anew.starts[0].promptTokens == reused.starts[0].promptTokens);
    CHECK(anew.ids() == reused.ids());
    REQUIRE(!anew.tokens.empty());
    CHECK(anew.tokens[0].prob == Approx(reused.tokens[0].prob).epsilon(1e-4));
    for (size_t l = 0; l < anew.tokens[0].residualNorms.size(); ++l)
        CHECK(anew.tokens[0].residualNorms[l] == Approx(reused.tokens[0].residualNorms[l]).epsilon(1e-4));

    SECTION("the same request again reuses everything but the prompt's last token") {
        const Run again = generate(engine, second);
        CHECK(again.starts[0].reusedTokens == int64_t(again.starts[0].promptTokens.size()) - 1);
        CHECK(again.ids() == reused.ids());
    }
}

TEST_CASE("stopping mid-reply keeps every token seen, and the cache and the conversation agree", "[chat]") {
    ChatEngine engine(*demo().model, *demo().backend);
    Conversation c;
    c.addUser(QStringLiteral("Tell me a long story."));
    ChatSettings s;
    s.sampler = SamplerSettings{0.9f, 0, 1.0f, 0.0f, 11};
    s.maxTokens = 200;
    const ChatRequest request = c.request(s);
    const Run r = generate(engine, request, 3);
    CHECK(r.outcome.stop == StopReason::Cancelled);
    CHECK(r.outcome.error.isEmpty());
    REQUIRE(r.tokens.size() == 3);
    CHECK(r.outcome.generated == 3);
    const std::vector<int32_t>& prompt = r.starts[0].promptTokens;
    CHECK(r.outcome.cacheTokens == concat(prompt, r.ids()));

    // As the chat window keeps it: the reply with its three tokens, whose sequence is what the cache holds.
    c.beginReply(request.sampler, 0);
    c.setReplyPrompt(prompt, r.starts[0].reusedTokens);
    for (const ChatToken& t : r.tokens) c.appendToken(std::make_shared<const ChatToken>(t));
    c.finishReply(r.outcome, QStringLiteral("stopped"));
    CHECK(c.tokensThrough(1, 2) == r.outcome.cacheTokens);
    CHECK(c.entry(1).content + r.outcome.tail ==
          QString::fromStdString(to_valid_utf8(demo().model->tokenizer.decode(r.ids()))));

    SECTION("the conversation goes on from there") {
        c.addUser(QStringLiteral("Go on."));
        const Run next = generate(engine, c.request(greedy(4)));
        REQUIRE(next.outcome.error.isEmpty());
        CHECK(next.starts[0].reusedTokens >= int64_t(prompt.size()));
        CHECK(next.outcome.cacheTokens == concat(next.starts[0].promptTokens, next.ids()));
    }
    SECTION("a stop before the first token changes nothing") {
        ChatRequest stopped = c.request(greedy(4));
        stopped.stop->store(true);
        const Run none = generate(engine, stopped);
        CHECK(none.tokens.empty());
        CHECK(none.outcome.stop == StopReason::Cancelled);
        // Whatever the prefill had done, the cache and its token list agree.
        CHECK(none.outcome.cacheTokens == engine.cacheTokens());
        const std::vector<int32_t> full = ChatEngine::promptTokens(*demo().model, stopped);
        CHECK(std::equal(none.outcome.cacheTokens.begin(), none.outcome.cacheTokens.end(), full.begin()));
    }
}

TEST_CASE("a binary16 KV cache is a cache of its own and gives the demo model's greedy reply", "[chat]") {
    ChatEngine engine(*demo().model, *demo().backend);
    Conversation c;
    c.setSystemPrompt(QStringLiteral("You are terse."));
    c.addUser(QStringLiteral("Name a colour."));
    ChatSettings s = greedy(12);
    const Run f32 = generate(engine, c.request(s));
    s.kvCacheF16 = true;
    const Run f16 = generate(engine, c.request(s));
    const Run again = generate(engine, c.request(s));
    for (const Run* r : {&f32, &f16, &again}) {
        REQUIRE(r->outcome.error.isEmpty());
        REQUIRE(r->starts.size() == 1);
    }
    CHECK_FALSE(f32.starts[0].kvCacheF16);
    CHECK(f16.starts[0].kvCacheF16);
    CHECK(f16.starts[0].reusedTokens == 0);  // nothing of the float32 cache is read as binary16
    CHECK(again.starts[0].reusedTokens > 0);  // the binary16 cache is kept across turns like the other
    // Each key and value rounded once changes no choice of this short greedy reply (docs/performance.md: logits
    // rel. L2 3e-4 on this model).
    CHECK(f16.ids() == f32.ids());
    CHECK(again.ids() == f16.ids());
    CHECK(f16.outcome.cacheTokens == engine.cacheTokens());
}

TEST_CASE("a message too long for the context is refused and the cache stays as it was", "[chat]") {
    ChatEngine engine(*demo().model, *demo().backend);
    Conversation c;
    c.addUser(QStringLiteral("Hi"));
    ChatSettings s = greedy(4);
    s.contextLength = 48;
    const Run first = generate(engine, c.request(s));
    REQUIRE(first.outcome.error.isEmpty());
    const std::vector<int32_t> before = first.outcome.cacheTokens;

    c.addUser(QString(QStringLiteral("word ")).repeated(60));
    const Run refused = generate(engine, c.request(s));
    CHECK(refused.outcome.doesNotFit);
    CHECK(refused.outcome.error.contains(QStringLiteral("does not fit")));
    CHECK(refused.outcome.error.contains(QStringLiteral("48")));
    CHECK(refused.tokens.empty());
    CHECK(refused.starts.empty());
    CHECK(refused.outcome.cacheTokens == before);
    CHECK(engine.cacheTokens() == before);

    SECTION("a reply that reaches the end of the context stops there") {
        Conversation d;
        d.addUser(QStringLiteral("Hi"));
        ChatSettings full = s;
        full.maxTokens = 1000;
        full.sampler = SamplerSettings{1.0f, 0, 1.0f, 0.0f, 3};
        const Run r = generate(engine, d.request(full));
        if (r.outcome.stop != StopReason::EndToken) {  // a random model may end its turn first
            CHECK(r.outcome.stop == StopReason::ContextFull);
            CHECK(r.outcome.cacheTokens.size() == 48);
        }
        CHECK(r.outcome.cacheTokens == concat(r.starts[0].promptTokens, r.ids()));
    }
}
