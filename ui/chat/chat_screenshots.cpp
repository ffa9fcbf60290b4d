#include "chat/chat_screenshots.hpp"

#include <memory>

#include <QPlainTextEdit>
#include <QTabWidget>

#include "chat/chat_engine.hpp"
#include "chat/chat_panel.hpp"
#include "chat/conversation.hpp"
#include "explorer/main_window.hpp"
#include "logits/lens_view.hpp"
#include "logits/logits_explorer.hpp"

namespace strata::ui {

std::vector<ChatShot> chatScreenshots(MainWindow* w) {
    auto* panel = w->findChild<ChatPanel*>(QStringLiteral("chatPanel"));
    auto* modes = w->findChild<QTabWidget*>(QStringLiteral("strataModes"));
    auto* logits = w->findChild<LogitsExplorer*>();
    auto* lens = w->findChild<LensView*>();
    if (!panel || !modes || !logits || !lens) return {};
    auto replies = std::make_shared<int>(0);
    QObject::connect(panel, &ChatPanel::replyFinished, panel, [replies] { ++*replies; });
    auto send = [panel](const QString& text) {
        panel->input()->setPlainText(text);
        panel->send();
    };
    // The token shown and opened: one in the middle of the first reply that released text.
    auto pick = [panel] {
        const ChatEntry& reply = panel->conversation()->entry(1);
        int i = std::min<int>(5, int(reply.tokens.size()) - 1);
        while (i > 0 && reply.tokens[size_t(i)]->text.trimmed().isEmpty()) --i;
        return i;
    };
    return {
        {QStringLiteral("chat-01-conversation"),
         [w, panel, modes, send] {
             modes->setCurrentWidget(panel);
             ChatSettings s;
             s.sampler = SamplerSettings{0.7f, 0, 0.9f, 0.0f, 1};
             s.maxTokens = 40;
             s.contextLength = ChatEngine::defaultContext(w->state()->model()->config);
             panel->setSettings(s);
             panel->systemPrompt()->setPlainText(QStringLiteral("You are a helpful assistant."));
             send(QStringLiteral("Hello! What can you tell me about llamas?"));
         },
         [replies] { return *replies >= 1; }},
        {QStringLiteral("chat-02-second-turn"),
         [send] { send(QStringLiteral("Thank you. And how tall do they grow?")); },
         [panel, replies, pick] {
             if (*replies < 2) return false;
             panel->showToken(1, pick());
             return true;
         }},
        {QStringLiteral("logits-01-explorer"),
         [panel, pick] { panel->openToken(1, pick()); },
         [w, logits] { return logits->isVisible() && logits->hasContent() && !w->busy(); }},
        {QStringLiteral("logits-02-find"),
         [logits] { logits->find(QStringLiteral("the")); },
         [logits] { return logits->hasContent(); }},
        {QStringLiteral("logits-03-lens"),
         [w, lens] {
             w->showView(lens);
             lens->compute();
         },
         [lens] { return lens->hasContent(); }},
    };
}

}  // namespace strata::ui
