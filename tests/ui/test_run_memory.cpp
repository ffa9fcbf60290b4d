// Long prompts in the explorer: the logit lens and each position's entropy are computed a chunk at a time and
// equal the whole prompt at once; a run whose estimate exceeds the memory is refused before anything is
// allocated, with a message naming the bytes and what to change, and the window shows it.
#include <QLabel>
#include <QSignalSpy>
#include <QStandardPaths>

#include "catch.hpp"
#include "explorer/engine_client.hpp"
#include "explorer/main_window.hpp"
#include "strata/backend.hpp"
#include "strata/host_memory.hpp"
#include "strata/model.hpp"
#include "strata/transformer.hpp"
#include "ui_support.hpp"
#include "worker/analysis.hpp"
#include "worker/engine_worker.hpp"
#include "worker/run_memory.hpp"

using namespace strata;
using namespace strata::ui;
using strata::test::wait_until;

namespace {

// The engine worker on the test's thread (its slots run at once) with what it sends.
struct Worker {
    EngineWorker w;
    ModelSummaryPtr summary;
    RunResultPtr run;
    LensResultPtr lens;
    QStringList failures;
    Worker() {
        QObject::connect(&w, &EngineWorker::modelLoaded, [this](qint64, const ModelSummaryPtr& s) { summary = s; });
        QObject::connect(&w, &EngineWorker::runFinished, [this](const RunResultPtr& r) { run = r; });
        QObject::connect(&w, &EngineWorker::lensFinished, [this](const LensResultPtr& l) { lens = l; });
        QObject::connect(&w, &EngineWorker::failed,
                         [this](qint64, const QString&, const QString& m) { failures << m; });
        w.openModel(1, QString::fromStdString(test::golden_hf_dir().string()), "cpu");
    }
};

// 150 positions of the golden model: three pieces of logits rows, more than the 16 M floats a run keeps whole.
std::vector<int32_t> longPrompt() {
    std::vector<int32_t> tokens{128000};
    for (int32_t t = 1; t < 150; ++t) tokens.push_back((t * 7919) % 30000);
    return tokens;
}

uint64_t total(const RunMemory& m) { return m.trace + m.lensHost + m.lensBackend + m.buffers; }

}  // namespace

TEST_CASE("the logit lens and each position's entropy, a chunk at a time, equal the whole prompt at once", "[ui][memory]") {
    test::ui_app();
    Worker k;
    REQUIRE(k.summary);
    const std::vector<int32_t> tokens = longPrompt();
    const int64_t T = int64_t(tokens.size());
    k.w.runTokens(2, "long", tokens, true);
    REQUIRE(k.failures.isEmpty());
    REQUIRE(k.run);
    REQUIRE(k.lens);
    CHECK(k.run->trace.find("logits") == nullptr);  // T x vocab is not kept

    // The whole prompt at once: every logits row kept, the residual stream copied into one array for the lens.
    const auto model = load_model(test::golden_hf_dir());
    auto backend = make_backend(BackendOptions{});
    backend->load(*model);
    const ModelConfig& c = model->config;
    Transformer tf(*model, *backend);
    TraceRequest all = TraceRequest::everything();
    all.attention_probs = false;
    KVCache cache(*backend, c, T);
    const Trace full = tf.prefill(cache, tokens, all);
    const TracedTensor& logits = *full.find("logits");
    REQUIRE(k.run->entropy.size() == size_t(T));
    REQUIRE(k.run->logSumExp.size() == size_t(T));
    for (int64_t t = 0; t < T; ++t) {
        const analysis::LogitStats st =
            analysis::logit_stats(std::span<const float>(logits.data).subspan(size_t(t * c.vocab_size), size_t(c.vocab_size)));
        CHECK(k.run->entropy[size_t(t)] == Approx(st.entropy).epsilon(1e-9));
        CHECK(k.run->logSumExp[size_t(t)] == Approx(st.log_sum_exp).epsilon(1e-9));
    }
    std::vector<float> x;  // [(n_layers + 1) * T, dim]
    for (int64_t l = 0; l <= c.n_layers; ++l) {
        const TracedTensor* h = full.find(l == 0 ? std::string("x0") : "h." + std::to_string(l - 1));
        x.insert(x.end(), h->data.begin(), h->data.end());
    }
    const analysis::TopTokens once = analysis::top_token_on_backend(tf, x, (c.n_layers + 1) * T);
    REQUIRE(k.lens->top.size() == once.id.size());
    CHECK(k.lens->top == once.id);
    // Other chunks of rows go through the matrix product together: the last bits of a sum may differ.
    for (size_t i = 0; i < once.prob.size(); ++i) CHECK(k.lens->prob[i] == Approx(once.prob[i]).epsilon(1e-4));
}

TEST_CASE("a run beyond the memory limit is refused before anything is allocated, naming the bytes and what to change", "[ui][memory]") {
    test::ui_app();
    Worker k;
    REQUIRE(k.summary);
    const ModelConfig& c = k.summary->config;
    const std::vector<int32_t> tokens = longPrompt();
    const int64_t T = int64_t(tokens.size());
    const RunMemory need = runMemory(c, EngineWorker::explorerRequest(c, T), T, true);
    CHECK(need.trace == trace_bytes(c, EngineWorker::explorerRequest(c, T), T));
    CHECK(need.lensHost > 0);

    // One byte short: refused, saying how much and what to change; nothing ran.
    k.w.setMemoryLimit(total(need) - 1);
    k.w.runTokens(2, "long", tokens, true);
    REQUIRE(k.failures.size() == 1);
    const std::string m = k.failures.takeFirst().toStdString();
    INFO(m);
    CHECK(m.find("150-token prompt needs " + format_bytes(total(need))) != std::string::npos);
    CHECK(m.find("the kept trace " + format_bytes(need.trace)) != std::string::npos);
    CHECK(m.find("more than the " + format_bytes(total(need) - 1) + " the cpu backend has available") != std::string::npos);
    CHECK(m.find("use a shorter prompt (at most about 149 tokens)") != std::string::npos);
    CHECK(m.find("or turn off the logit lens") != std::string::npos);
    CHECK_FALSE(k.run);
    CHECK_FALSE(k.lens);

    // Far short, without the lens: the longest prompt that fits is what the message says, and it does fit.
    const uint64_t small = (need.trace + need.buffers) / 2;
    k.w.setMemoryLimit(small);
    k.w.runTokens(3, "long", tokens, false);
    REQUIRE(k.failures.size() == 1);
    const std::string m2 = k.failures.takeFirst().toStdString();
    INFO(m2);
    CHECK(m2.find("logit lens") == std::string::npos);  // it was off
    const size_t at = m2.find("at most about ");
    REQUIRE(at != std::string::npos);
    const int64_t fitting = std::stoll(m2.substr(at + 14));
    CHECK(fitting > 1);
    CHECK(fitting < T);
    const std::vector<int32_t> shorter(tokens.begin(), tokens.begin() + fitting);
    k.w.runTokens(4, "shorter", shorter, false);
    CHECK(k.failures.isEmpty());
    REQUIRE(k.run);
    CHECK(k.run->tokens.size() == size_t(fitting));

    // Exactly the estimate: the whole run and its lens.
    k.run.reset();
    k.w.setMemoryLimit(total(need));
    k.w.runTokens(5, "long", tokens, true);
    CHECK(k.failures.isEmpty());
    CHECK(k.run);
    CHECK(k.lens);
}

TEST_CASE("the explorer shows why a run that does not fit in memory was refused, and goes on", "[ui][widgets][memory]") {
    test::ui_app();
    QStandardPaths::setTestModeEnabled(true);
    MainWindow w;
    QSignalSpy runs{&w, &MainWindow::runReady};
    QSignalSpy failures{&w, &MainWindow::failed};
    w.resize(1600, 1000);
    w.show();
    w.openPath(QString::fromStdString(test::demo_model().string()));
    REQUIRE(wait_until([&] { return runs.count() >= 1; }));
    REQUIRE(failures.count() == 0);

    // About 40 tokens: with the lens (its chunk of 128 logits rows, 66 MB on the host and as much on the backend)
    // more than 80 MiB on either backend, without it less.
    const QString prompt = QString("The capital of France is Paris. ").repeated(6);
    w.client()->worker()->setMemoryLimit(80 << 20);
    w.runPrompt(prompt);
    REQUIRE(wait_until([&] { return failures.count() >= 1; }));
    const QString message = failures.takeFirst().at(0).toString();
    INFO(message.toStdString());
    CHECK(message.contains("-token prompt needs "));
    CHECK(message.contains("more than the 80.0 MiB"));
    CHECK(message.contains("has available"));
    CHECK(message.contains("turn off the logit lens"));
    CHECK(w.lastError() == message);
    bool shown = false;
    for (QLabel* l : w.findChildren<QLabel*>())
        shown = shown || (l->isVisible() && l->text().contains("more than the 80.0 MiB"));
    CHECK(shown);
    CHECK(runs.count() == 1);

    // With the memory back, the same prompt runs.
    w.client()->worker()->setMemoryLimit(0);
    w.runPrompt(prompt);
    CHECK(wait_until([&] { return runs.count() == 2; }));
}
