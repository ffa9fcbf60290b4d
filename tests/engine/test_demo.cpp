// The trained demonstration model as shipped: its expansion is reproducible, its unused vocabulary rows stay out of
// the way, and what it learned (held-out loss, an induction head, everyday English, a fixed greedy completion and
// chat reply) is where docs/demo-model.md records it, on the CPU backend (tests/vulkan repeats the short checks).
#include <cmath>
#include <string>

#include "catch.hpp"
#include "demo_support.hpp"
#include "strata/error.hpp"
#include "strata/generate.hpp"

using namespace strata;
using namespace strata::test;
namespace fs = std::filesystem;

namespace {

// Recorded from the shipped model (docs/demo-model.md gives the measured values; the bounds leave a margin for
// other compilers and CPUs, whose float sums differ in the last bits).
constexpr double DEMO_MAX_UNUSED_MASS = 0.0014;       // measured 0.00070
constexpr double DEMO_MAX_HELDOUT_LOSS = 2.40;        // measured 2.327
constexpr double DEMO_MIN_FIRST_COPY_LOSS = 5.5;      // measured 6.42: the first copy is random tokens
constexpr double DEMO_MAX_INDUCTION_RATIO = 0.2;      // measured 0.134 (second copy 0.86 nats against 6.42)
constexpr double DEMO_MAX_EVERYDAY_LOSS = 4.9;        // measured 4.735 (a unigram model of the training text: 5.40)
// The induction head: the strongest prefix-matching head, and how strongly it matches (measured 0.950).
constexpr const char* DEMO_INDUCTION_HEAD = "layers.1 h5";
constexpr double DEMO_MIN_PREFIX_MATCHING = 0.8;
constexpr const char* DEMO_PROMPT = "Once upon a time, there was a little";
constexpr const char* DEMO_COMPLETION = " bird named Anna. She liked to play with friends. Anna had a friend named Anna. One day, Anna went to";
constexpr const char* DEMO_CHAT_USER = "What is the capital of France?";
constexpr const char* DEMO_CHAT_REPLY = "The capital of France is Paris.<|eot_id|>";

struct Demo {
    std::unique_ptr<Model> model;
    std::unique_ptr<Backend> backend;
    Demo() {
        model = load_model(trained_demo_dir());
        backend = make_backend(BackendOptions{});
        backend->load(*model);
    }
};

Demo& demo() {
    static Demo d;
    return d;
}

// What the [demo] tests measured, also written to <build>/tmp/demo-figures.json (docs/demo-model.md quotes it).
void record(const std::string& key, const nlohmann::json& value) {
    static nlohmann::json figures = nlohmann::json::object();
    figures[key] = value;
    write_file(fs::path(STRATA_BINARY_DIR) / "tmp" / "demo-figures.json", figures.dump(1) + "\n");
}

std::string completion(const std::vector<int32_t>& prompt, int n) {
    Demo& d = demo();
    return d.model->tokenizer.decode(greedy(*d.model, *d.backend, prompt, n));
}

}  // namespace

TEST_CASE("the trained demo expands to the same bytes every time", "[demo]") {
    const fs::path a = temp_dir("demo-same-a"), b = temp_dir("demo-same-b");
    make_demo_model(a, tokenizer_json());
    make_demo_model(b, tokenizer_json());
    for (const char* f : {"model.safetensors", "config.json", "generation_config.json", "README.txt", "tokenizer.json"})
        CHECK(read_file(a / f) == read_file(b / f));
    CHECK(demo_model_is_current(a));
    DemoOptions r;
    r.random = true;
    make_demo_model(b, tokenizer_json(), r);
    CHECK_FALSE(demo_model_is_current(b));
    CHECK(read_file(a / "model.safetensors") != read_file(b / "model.safetensors"));
}

TEST_CASE("the trained demo says what it is", "[demo]") {
    const ModelConfig& c = demo().model->config;
    CHECK(c.is_demo);
    CHECK(c.demo_trained);
    CHECK(c.is_instruct);  // trained on the instruct template: chat opens in chat mode
    CHECK(c.tie_embeddings);
    CHECK(c.rope_scaling.enabled);
    CHECK(c.dim == 256);
    CHECK(c.n_layers == 4);
    CHECK(c.n_heads == 8);
    CHECK(c.n_kv_heads == 2);
    CHECK(c.hidden_dim == 768);
    CHECK_THAT(c.demo_description, Catch::Contains("trained") && Catch::Contains("generated English"));
    CHECK_THAT(read_file(trained_demo_dir() / "README.txt"), !Catch::Contains("RANDOM WEIGHTS"));
}

TEST_CASE("the trained demo's unused vocabulary rows share one row and never win", "[demo]") {
    Demo& d = demo();
    const TensorView& e = d.model->tensor("tok_embeddings");
    const std::vector<float> table = e.to_f32();  // [128256, dim]
    const int64_t dim = e.cols();
    auto row = [&](int64_t id) { return std::vector<float>(table.begin() + id * dim, table.begin() + (id + 1) * dim); };
    const auto unused = row(120000);  // a rare CJK-ish merge, never in the generated text
    CHECK(row(127000) == unused);
    CHECK(row(128100) == unused);      // a reserved special token
    CHECK(row(791) != unused);         // "The"
    // On held-out text the unused rows together get little probability and none of them is ever the argmax.
    const auto seq = heldout_sequences().at(0);
    const std::vector<int32_t> ids(seq.begin(), seq.begin() + 64);
    const std::vector<float> logits = all_logits(*d.model, *d.backend, ids);
    const int64_t V = d.model->config.vocab_size;
    const int32_t u = 120000;
    double worst_mass = 0;
    for (size_t p = 0; p < ids.size(); ++p) {
        const float* r = logits.data() + int64_t(p) * V;
        const double mx = *std::max_element(r, r + V);
        CHECK(double(r[u]) < mx);
        double s = 0, s_unused = 0;
        for (int64_t i = 0; i < V; ++i) {
            const double x = std::exp(double(r[i]) - mx);
            s += x;
            if (r[i] == r[u]) s_unused += x;  // every unused row has exactly this logit
        }
        worst_mass = std::max(worst_mass, s_unused / s);
    }
    WARN("largest total probability of the unused rows at a position: " << worst_mass);
    record("mass", worst_mass);
    CHECK(worst_mass < DEMO_MAX_UNUSED_MASS);
}

TEST_CASE("the trained demo's held-out loss and induction score are within the recorded bounds", "[demo]") {
    Demo& d = demo();
    double held = 0;
    const auto seqs = heldout_sequences();
    for (const auto& s : seqs) held += mean(next_token_losses(*d.model, *d.backend, s)) / double(seqs.size());
    const InductionScore ind = induction_score(*d.model, *d.backend, 4, 40, 7);
    const int n_heads = int(d.model->config.n_heads);
    const std::string head = "layers." + std::to_string(ind.best_head() / n_heads) + " h" +
                             std::to_string(ind.best_head() % n_heads);
    WARN("held-out loss " << held << " nats; induction: first copy " << ind.first << ", second copy " << ind.second
                          << ", ratio " << ind.ratio() << "; strongest prefix-matching head " << head << " at "
                          << ind.best_score());
    record("held", held);
    record("ind_first", ind.first);
    record("ind_second", ind.second);
    record("ind_head", head);
    record("ind_prefix_matching", ind.best_score());
    CHECK(held < DEMO_MAX_HELDOUT_LOSS);
    CHECK(ind.first > DEMO_MIN_FIRST_COPY_LOSS);  // the first copy is unpredictable: random tokens
    CHECK(ind.ratio() < DEMO_MAX_INDUCTION_RATIO);
    // The head that does it attends from a token of the second copy to what followed that token in the first.
    CHECK(head == DEMO_INDUCTION_HEAD);
    CHECK(ind.best_score() > DEMO_MIN_PREFIX_MATCHING);
}

TEST_CASE("the trained demo's everyday-English loss is far below a unigram model's", "[demo]") {
    Demo& d = demo();
    const std::string text = read_file(fs::path(STRATA_SOURCE_DIR) / "resources" / "demo" / "everyday.txt");
    double total = 0;
    size_t n = 0, from = 0;
    while (from < text.size()) {
        size_t to = text.find("\n\n", from);
        if (to == std::string::npos) to = text.size();
        std::vector<int32_t> ids = {128000};
        std::string para = text.substr(from, to - from);
        while (!para.empty() && (para.back() == '\n' || para.back() == ' ')) para.pop_back();
        const auto e = d.model->tokenizer.encode(para);
        ids.insert(ids.end(), e.begin(), e.end());
        if (e.size() > 1)
            for (double l : next_token_losses(*d.model, *d.backend, ids)) total += l, ++n;
        from = to + 2;
    }
    WARN("mean next-token loss on resources/demo/everyday.txt: " << total / double(n) << " nats over " << n);
    record("every", total / double(n));
    record("every_tokens", n);
    CHECK(total / double(n) < DEMO_MAX_EVERYDAY_LOSS);
}

TEST_CASE("the trained demo's greedy completion and chat reply are the recorded ones", "[demo]") {
    Demo& d = demo();
    std::vector<int32_t> prompt = {128000};
    const auto e = d.model->tokenizer.encode(DEMO_PROMPT);
    prompt.insert(prompt.end(), e.begin(), e.end());
    const std::string got = completion(prompt, 24);
    const auto chat = chat_tokens(d.model->tokenizer, {ChatMessage{"user", DEMO_CHAT_USER}});
    const std::string reply = completion(chat, 40);
    WARN("completion: [" << got << "]\nchat reply: [" << reply << "]");
    record("completion", got);
    record("reply", reply);
    CHECK(got == DEMO_COMPLETION);
    CHECK(reply == DEMO_CHAT_REPLY);
}
