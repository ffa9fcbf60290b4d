// The chat in Strata's window, offscreen, end to end with the demonstration model: type and send, watch tokens
// stream, stop, go on to a second turn that reuses the KV cache, click a generated token and land in the explorer
// at the step that chose it (the logits explorer and the logit lens agree with what the chat kept), a message that
// does not fit, and settings that persist.
#include <QComboBox>
#include <QElapsedTimer>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTest>
#include <QTextBlock>
#include <QTextDocument>

#include "catch.hpp"
#include "demo_support.hpp"
#include "chat/chat_panel.hpp"
#include "chat/chat_settings.hpp"
#include "chat/chat_transcript.hpp"
#include "chat/conversation.hpp"
#include "explorer/engine_client.hpp"
#include "explorer/main_window.hpp"
#include "logits/distribution.hpp"
#include "logits/lens_view.hpp"
#include "logits/logits_explorer.hpp"
#include "logits/sampling_controls.hpp"
#include "ui_support.hpp"

using namespace strata;
using namespace strata::ui;
using strata::test::wait_until;

namespace {

std::vector<int32_t> concat(std::vector<int32_t> a, const ChatEntry& reply) {
    for (const ChatTokenPtr& t : reply.tokens) a.push_back(t->id);
    return a;
}

int tokensOf(ChatPanel* p) {
    const int r = p->conversation()->lastReply();
    return r < 0 ? 0 : int(p->conversation()->entry(r).tokens.size());
}

}  // namespace

TEST_CASE("a chat with the demonstration model, end to end: send, stream, stop, go on, open a token", "[chat][widgets]") {
    test::ui_app();
    QStandardPaths::setTestModeEnabled(true);  // the chat's settings go to a test settings file
    MainWindow w;
    QSignalSpy loaded(&w, &MainWindow::modelReady);
    QSignalSpy runs(&w, &MainWindow::runReady);
    w.resize(1600, 1000);
    w.show();
    w.openPath(QString::fromStdString(test::demo_model().string()));
    REQUIRE(wait_until([&] { return loaded.count() >= 1 && runs.count() >= 1; }));

    auto* panel = w.findChild<ChatPanel*>(QStringLiteral("chatPanel"));
    auto* modes = w.findChild<QTabWidget*>(QStringLiteral("strataModes"));
    auto* logits = w.findChild<LogitsExplorer*>();
    auto* lens = w.findChild<LensView*>();
    REQUIRE(panel);
    REQUIRE(modes);
    REQUIRE(logits);
    REQUIRE(lens);
    modes->setCurrentWidget(panel);
    REQUIRE(panel->conversation()->mode() == ChatMode::Chat);  // the demonstration model is instruct-shaped
    REQUIRE(panel->sendButton()->isEnabled());

    ChatSettings s;
    s.sampler = SamplerSettings{0.8f, 0, 1.0f, 0.0f, 7};
    s.maxTokens = 2000;
    s.contextLength = 4096;
    panel->setSettings(s);
    QSignalSpy finished(panel, &ChatPanel::replyFinished);

    // Type, send, and watch the tokens stream in.
    QTest::keyClicks(panel->input(), QStringLiteral("Hello there, who are you?"));
    QTest::mouseClick(panel->sendButton(), Qt::LeftButton);
    CHECK(panel->input()->toPlainText().isEmpty());
    REQUIRE(panel->generating());
    CHECK(panel->stopButton()->isEnabled());
    CHECK_FALSE(panel->sendButton()->isEnabled());
    REQUIRE(wait_until([&] { return tokensOf(panel) >= 4; }));
    CHECK(panel->statusText().contains(QStringLiteral("tokens/s")));
    QTest::mouseClick(panel->stopButton(), Qt::LeftButton);
    REQUIRE(wait_until([&] { return finished.count() == 1; }));
    CHECK_FALSE(panel->generating());

    Conversation* c = panel->conversation();
    REQUIRE(c->size() == 2);
    const ChatEntry first = c->entry(1);  // a copy: the conversation grows below
    CHECK(first.note == QStringLiteral("stopped"));
    CHECK(first.tokens.size() >= 4);
    CHECK(first.tokens.size() < 2000);
    // The KV cache holds exactly the prompt and the reply's tokens.
    CHECK(panel->cacheTokens() == concat(first.promptTokens, first));
    CHECK(panel->statusText().contains(QStringLiteral("context %1 / 4,096").arg(panel->cacheTokens().size())));
    CHECK(panel->transcript()->plainText().contains(first.content.trimmed().left(20)));

    // A second turn: the first turn's prompt comes from the cache.
    panel->setSettings([&] {
        ChatSettings t = s;
        t.maxTokens = 6;
        return t;
    }());
    QTest::keyClicks(panel->input(), QStringLiteral("And then?"));
    QTest::keyClick(panel->input(), Qt::Key_Return, Qt::ControlModifier);
    REQUIRE(wait_until([&] { return finished.count() == 2; }));
    REQUIRE(c->size() == 4);
    const ChatEntry& second = c->entry(3);
    CHECK(second.reusedTokens >= int64_t(first.promptTokens.size()));
    CHECK(panel->cacheTokens() == concat(second.promptTokens, second));
    CHECK(panel->statusText().contains(QStringLiteral("reused from the KV cache")));
    REQUIRE(!second.tokens.empty());

    // Click a generated token in the transcript: the explorer opens at the step that chose it.
    QSignalSpy opened(panel, &ChatPanel::openTokenRequested);
    const int index = std::min<int>(2, int(first.tokens.size()) - 1);
    int clickIndex = index;
    while (first.tokens[size_t(clickIndex)]->text.trimmed().isEmpty() && clickIndex + 1 < int(first.tokens.size())) ++clickIndex;
    const auto [from, to] = panel->transcript()->pieceRange(1, clickIndex);
    REQUIRE(from >= 0);
    QTextCursor cursor(panel->transcript()->document());
    cursor.setPosition(from + std::max(0, (to - from) / 2));
    panel->transcript()->setTextCursor(cursor);
    panel->transcript()->ensureCursorVisible();
    const QRect where = panel->transcript()->cursorRect(cursor);
    QTest::mouseClick(panel->transcript()->viewport(), Qt::LeftButton, {}, where.center() + QPoint(1, 0));
    REQUIRE(opened.count() == 1);
    const TokenOpen open = opened.takeFirst().at(0).value<TokenOpen>();
    const int clicked = Conversation::pieceStart(first, clickIndex);
    const ChatToken& chosen = *first.tokens[size_t(clicked)];
    CHECK(open.id == chosen.id);
    CHECK(open.tokens == c->tokensThrough(1, clicked));
    CHECK(open.step == int(chosen.position) - 1);
    CHECK(modes->currentIndex() == 0);  // the explorer

    ExplorerState* st = w.state();
    REQUIRE(wait_until([&] { return st->run() && st->run()->tokens == open.tokens && st->position() == open.step; }));
    // The logits explorer shows that step's distribution, recomputed from the conversation: the chosen token has
    // the rank and probability the chat kept while generating.
    REQUIRE(wait_until([&] { return logits->hasContent(); }));
    const LogitsDistribution& d = logits->distribution();
    CHECK(d.rankOf(chosen.id) == chosen.rank);
    CHECK(d.prob(chosen.id) == Approx(chosen.prob).epsilon(1e-3));
    for (size_t k = 0; k < chosen.top.size(); ++k) CHECK(d.idAt(int64_t(k)) == chosen.top[k].id);
    CHECK(logits->sampling()->settings().temperature == Approx(0.8f));  // the reply's settings
    CHECK(logits->heading().contains(QStringLiteral("id %1").arg(chosen.id)));

    // The logit lens there: its last row is that distribution.
    w.showView(lens);
    lens->compute();
    REQUIRE(wait_until([&] { return lens->hasContent(); }));
    REQUIRE(lens->model()->rowCount() == int(st->model()->config.n_layers + 1));
    CHECK(lens->model()->rows().back().top.front() == d.idAt(0));
    CHECK(lens->followed() == chosen.id);
    CHECK(lens->model()->track().rank.back() == chosen.rank);
}

TEST_CASE("a message that does not fit the context is refused and the conversation stays as it was", "[chat][widgets]") {
    test::ui_app();
    QStandardPaths::setTestModeEnabled(true);
    MainWindow w;
    QSignalSpy loaded(&w, &MainWindow::modelReady);
    w.show();
    w.openPath(QString::fromStdString(test::demo_model().string()));
    REQUIRE(wait_until([&] { return loaded.count() >= 1; }));
    auto* panel = w.findChild<ChatPanel*>(QStringLiteral("chatPanel"));
    REQUIRE(panel);
    QSignalSpy finished(panel, &ChatPanel::replyFinished);
    ChatSettings s;
    s.sampler = SamplerSettings{0.0f, 0, 1.0f, 0.0f, 0};
    s.maxTokens = 3;
    s.contextLength = 64;
    panel->setSettings(s);
    panel->input()->setPlainText(QStringLiteral("Hi"));
    panel->send();
    REQUIRE(wait_until([&] { return finished.count() == 1; }));
    REQUIRE(panel->conversation()->size() == 2);
    const QString reply = panel->conversation()->entry(1).content;
    const std::vector<int32_t> cache = panel->cacheTokens();

    const QString longMessage = QString(QStringLiteral("many words ")).repeated(40);
    panel->input()->setPlainText(longMessage);
    panel->send();
    REQUIRE(wait_until([&] { return finished.count() == 2; }));
    CHECK(panel->bannerText().contains(QStringLiteral("does not fit")));
    CHECK(panel->conversation()->size() == 2);
    CHECK(panel->conversation()->entry(1).content == reply);
    CHECK(panel->input()->toPlainText() == longMessage);
    CHECK(panel->cacheTokens() == cache);
    CHECK(panel->transcript()->plainText().contains(QStringLiteral("Hi")));
    CHECK_FALSE(panel->transcript()->plainText().contains(QStringLiteral("many words")));

    SECTION("editing a message and resending replaces it and what followed") {
        panel->editMessage(0);
        CHECK(panel->input()->toPlainText() == QStringLiteral("Hi"));
        panel->input()->setPlainText(QStringLiteral("Hello"));
        panel->send();
        REQUIRE(wait_until([&] { return finished.count() == 3; }));
        REQUIRE(panel->conversation()->size() == 2);
        CHECK(panel->conversation()->entry(0).content == QStringLiteral("Hello"));
        CHECK(panel->cacheTokens() == concat(panel->conversation()->entry(1).promptTokens, panel->conversation()->entry(1)));
    }
    SECTION("regenerate replaces the last reply, with the next seed") {
        panel->regenerate();
        REQUIRE(wait_until([&] { return finished.count() == 3; }));
        REQUIRE(panel->conversation()->size() == 2);
        CHECK(panel->conversation()->entry(1).attempt == 1);
        CHECK(panel->conversation()->entry(1).content == reply);  // greedy: the seed does not matter
    }
    SECTION("clear starts over") {
        panel->clearConversation();
        CHECK(panel->conversation()->size() == 0);
        CHECK(panel->transcript()->plainText().trimmed().isEmpty());
    }
}

TEST_CASE("the chat's sampling settings and system prompt persist", "[chat][widgets]") {
    test::ui_app();
    QStandardPaths::setTestModeEnabled(true);
    EngineClient engine;
    ChatSettings s;
    s.sampler = SamplerSettings{0.35f, 40, 0.85f, 0.05f, 1234};
    s.maxTokens = 77;
    s.kvCacheF16 = true;
    {
        ChatPanel first(&engine);
        first.setSettings(s);
        first.systemPrompt()->setPlainText(QStringLiteral("Answer in French."));
    }
    const ChatSettings loaded = loadChatSettings();
    CHECK(loaded.sampler.temperature == Approx(0.35f));
    CHECK(loaded.sampler.top_k == 40);
    CHECK(loaded.sampler.top_p == Approx(0.85f));
    CHECK(loaded.sampler.min_p == Approx(0.05f));
    CHECK(loaded.sampler.seed == 1234);
    CHECK(loaded.maxTokens == 77);
    CHECK(loaded.kvCacheF16);
    ChatPanel second(&engine);
    CHECK(second.settings().kvCacheF16);
    auto* kv = second.findChild<QComboBox*>(QStringLiteral("chatKvCache"));
    REQUIRE(kv);
    CHECK(kv->currentText() == QStringLiteral("binary16"));
    kv->setCurrentIndex(0);  // a person's choice is saved at once
    CHECK_FALSE(loadChatSettings().kvCacheF16);
    CHECK(second.settings().sampler.temperature == Approx(0.35f));
    CHECK(second.settings().sampler.top_k == 40);
    CHECK(second.settings().sampler.seed == 1234);
    CHECK(second.settings().maxTokens == 77);
    CHECK(second.systemPrompt()->toPlainText() == QStringLiteral("Answer in French."));
}

TEST_CASE("closing while a reply streams returns at once: the worker stops between tokens", "[chat][widgets]") {
    test::ui_app();
    auto* client = new EngineClient;
    QSignalSpy loaded(client, &EngineClient::modelLoaded);
    // The random-weights demo: the trained one may end its story with <|eot_id|> before the window closes (on a
    // fast machine, within the wait below), and then there is no reply left to stop.
    client->openModel(QString::fromStdString(test::random_demo_dir().string()), QStringLiteral("cpu"));
    REQUIRE(wait_until([&] { return loaded.count() >= 1; }));

    auto request = std::make_shared<ChatRequest>();
    request->mode = ChatMode::Completion;
    request->document = "Once upon a time";
    request->sampler.temperature = 0.8f;
    request->maxTokens = 1000000;  // far longer than anyone would wait for
    request->contextLength = 4096;
    EngineWorker* worker = client->worker();
    // Counted on this thread: a QSignalSpy on the worker's signal is called on the worker's thread (a direct
    // connection) while wait_until reads it here, a data race ThreadSanitizer found.
    int tokens = 0;
    QObject counter;
    QObject::connect(worker, &EngineWorker::chatToken, &counter, [&tokens](qint64, const ChatTokenPtr&) { ++tokens; },
                     Qt::QueuedConnection);
    const qint64 id = client->newId();
    QMetaObject::invokeMethod(worker, [worker, id, request] { worker->chatGenerate(id, request); });
    REQUIRE(wait_until([&] { return tokens >= 3; }));

    // What the window does when it closes: the client goes, joining the worker's thread.
    QElapsedTimer timer;
    timer.start();
    delete client;
    INFO("the thread joined after " << timer.elapsed() << " ms");
    CHECK(timer.elapsed() < 5000);
    CHECK(request->stop->load());  // the reply was told to stop, not left to run out its tokens
}
