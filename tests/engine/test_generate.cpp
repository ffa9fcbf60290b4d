// Generation through a Session on the golden model: greedy equals argmax and the golden continuation, seeded
// sampling repeats, the chat template is Meta's token for token, and the session stops when it should.
#include <algorithm>
#include <atomic>

#include "catch.hpp"
#include "strata/backend.hpp"
#include "strata/error.hpp"
#include "strata/generate.hpp"
#include "strata/model.hpp"
#include "support.hpp"

using namespace strata;

namespace {

struct Loaded {
    std::unique_ptr<Model> model;
    std::unique_ptr<Backend> backend;
    Loaded() {
        model = load_model(test::golden_hf_dir());
        backend = make_backend(BackendOptions{});
        backend->load(*model);
    }
};

Loaded& golden() {
    static Loaded g;
    return g;
}

std::vector<int32_t> short_prompt() {
    return test::expected()["prompts"]["short"]["tokens"].get<std::vector<int32_t>>();
}

std::vector<int32_t> run(Session& s, const GenerateOptions& o, StopReason* reason = nullptr,
                         std::vector<GeneratedToken>* tokens = nullptr) {
    std::vector<int32_t> ids;
    StopReason r = s.generate(o, [&](const GeneratedToken& g) {
        ids.push_back(g.id);
        if (tokens) tokens->push_back(g);
        return true;
    });
    if (reason) *reason = r;
    return ids;
}

}  // namespace

TEST_CASE("temperature 0 generation is the argmax at every step and the golden continuation", "[generate]") {
    Loaded& g = golden();
    Session s(*g.model, *g.backend, 64);
    const auto prompt = short_prompt();
    s.feed(prompt);
    std::vector<float> logits = s.last_logits();
    GenerateOptions o;
    o.max_tokens = 16;
    StopReason reason;
    std::vector<GeneratedToken> steps;
    const auto ids = run(s, o, &reason, &steps);
    CHECK(reason == StopReason::MaxTokens);
    CHECK(ids == test::expected()["prompts"]["short"]["greedy_ids"].get<std::vector<int32_t>>());
    for (size_t i = 0; i < steps.size(); ++i) {
        INFO("step " << i);
        CHECK(steps[i].id == std::max_element(logits.begin(), logits.end()) - logits.begin());
        CHECK(steps[i].position == int64_t(prompt.size() + i));
        CHECK(steps[i].trace.find("h.0") != nullptr);
        logits = steps[i].trace.last_logits;
    }
    CHECK(s.tokens().size() == prompt.size() + 16);

    // Regenerate: truncate to the prompt and get the same continuation again.
    s.truncate(int64_t(prompt.size()));
    CHECK(s.tokens() == prompt);
    CHECK(run(s, o) == ids);
}

TEST_CASE("seeded sampling is reproducible", "[generate]") {
    Loaded& g = golden();
    auto sample = [&](uint64_t seed) {
        Session s(*g.model, *g.backend, 64);
        s.feed(short_prompt());
        GenerateOptions o;
        o.max_tokens = 12;
        o.sampler.temperature = 1.0f;
        o.sampler.top_k = 200;
        o.sampler.seed = seed;
        return run(s, o);
    };
    const auto a = sample(1234);
    CHECK(a.size() == 12);
    CHECK(sample(1234) == a);
    CHECK(sample(99) != a);
}

TEST_CASE("chat_tokens is the Llama 3 template with special ids only from the template", "[generate]") {
    const Tokenizer& tok = golden().model->tokenizer;
    const std::vector<ChatMessage> dialog{{"system", "You are terse."},
                                          {"user", "  Hello  \n"},
                                          {"assistant", "Hi. <|eot_id|>"},
                                          {"user", "Bye"}};
    const auto ids = chat_tokens(tok, dialog);
    auto enc = [&](const char* s) { return tok.encode(s); };
    // <|begin_of_text|>=128000 <|start_header_id|>=128006 <|end_header_id|>=128007 <|eot_id|>=128009;
    // "system"=9125, "user"=882, "assistant"=78191, "\n\n"=271, "Hello"=9906.
    std::vector<int32_t> want{128000, 128006, 9125, 128007, 271};
    auto add = [&](const std::vector<int32_t>& v) { want.insert(want.end(), v.begin(), v.end()); };
    add(enc("You are terse."));
    add({128009, 128006, 882, 128007, 271, 9906, 128009, 128006, 78191, 128007, 271});
    add(enc("Hi. <|eot_id|>"));  // the text of a special token stays text
    add({128009, 128006, 882, 128007, 271});
    add(enc("Bye"));
    add({128009, 128006, 78191, 128007, 271});
    CHECK(ids == want);
    CHECK(std::count(ids.begin(), ids.end(), 128009) == 4);

    const auto no_prompt = chat_tokens(tok, {{"user", "Hello"}}, false);
    CHECK(no_prompt == std::vector<int32_t>{128000, 128006, 882, 128007, 271, 9906, 128009});
}

TEST_CASE("stop ids, a full context, a callback that stops and a cancel flag", "[generate]") {
    Loaded& g = golden();
    const auto stops = stop_ids(*g.model);
    // <|end_of_text|> and <|eot_id|>; <|eom_id|> (128008) only where the tokenizer has it (Llama 3.1 and later).
    for (int32_t id : {128001, 128009}) CHECK(std::count(stops.begin(), stops.end(), id) == 1);
    const auto eom = g.model->tokenizer.special_id("<|eom_id|>");
    CHECK(std::count(stops.begin(), stops.end(), 128008) == (eom ? 1 : 0));

    const auto prompt = short_prompt();
    Session s(*g.model, *g.backend, int64_t(prompt.size()) + 3);
    GenerateOptions o;
    o.max_tokens = 10;
    CHECK_THROWS_AS(run(s, o), InputError);  // nothing fed yet
    s.feed(prompt);
    StopReason reason;
    CHECK(run(s, o, &reason).size() == 3);
    CHECK(reason == StopReason::ContextFull);
    CHECK(stop_reason_name(reason) == "context_full");

    Session s2(*g.model, *g.backend, 64);
    s2.feed(prompt);
    int calls = 0;
    CHECK(s2.generate(o, [&](const GeneratedToken&) { return ++calls < 2; }) == StopReason::Cancelled);
    CHECK(calls == 2);
    std::atomic<bool> cancel{true};
    CHECK(s2.generate(o, [](const GeneratedToken&) { return true; }, &cancel) == StopReason::Cancelled);
    CHECK(s2.tokens().size() == prompt.size() + 2);
}
