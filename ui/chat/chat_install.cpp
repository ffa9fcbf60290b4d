#include "chat/chat_install.hpp"

#include <memory>

#include <QAction>
#include <QMenu>
#include <QMenuBar>
#include <QStatusBar>
#include <QTabWidget>

#include "chat/chat_panel.hpp"
#include "explorer/main_window.hpp"
#include "logits/lens_view.hpp"
#include "logits/logits_explorer.hpp"
#include "logits/logits_source.hpp"

namespace strata::ui {

void installChat(MainWindow* w) {
    // One tab bar above everything: the explorer as it was, and the chat.
    QWidget* explorer = w->takeCentralWidget();
    auto* modes = new QTabWidget;
    modes->setObjectName(QStringLiteral("strataModes"));
    modes->setDocumentMode(true);
    modes->addTab(explorer, QObject::tr("Explorer"));
    auto* chat = new ChatPanel(w->client());
    chat->setObjectName(QStringLiteral("chatPanel"));
    modes->addTab(chat, QObject::tr("Chat"));
    w->setCentralWidget(modes);

    // The logits explorer and the logit lens, beside the explorer's other views; they share one source.
    auto* source = new LogitsSource(w->state(), w->client(), w);
    auto* logits = new LogitsExplorer(w->state(), w->client(), source);
    auto* lens = new LensView(w->state(), w->client(), source);
    for (ViewPage* v : {static_cast<ViewPage*>(logits), static_cast<ViewPage*>(lens)}) {
        w->tabs()->addTab(v, v->title());
        QObject::connect(v, &ViewPage::message, w, [w](const QString& m) { w->statusBar()->showMessage(m, 8000); });
    }

    QObject::connect(w->state(), &ExplorerState::modelChanged, chat, [w, chat] { chat->setModel(w->state()->model()); });

    // A generated token opens the explorer at the step that chose it: the conversation up to the token is run with
    // the full trace, and once that run is in, the position before the token is selected.
    auto pending = std::make_shared<std::pair<qint64, int>>(0, -1);
    QObject::connect(chat, &ChatPanel::openTokenRequested, w, [w, modes, explorer, logits, pending](const TokenOpen& o) {
        modes->setCurrentWidget(explorer);
        w->showView(logits);
        logits->setSampling(o.sampler);
        pending->first = w->runTokens(o.label, o.tokens, false);
        pending->second = o.step;
    });
    // "What made this token": the same run, then its attribution at the step that chose the token.
    QObject::connect(chat, &ChatPanel::attributeTokenRequested, w, [w, modes, explorer](const TokenOpen& o) {
        modes->setCurrentWidget(explorer);
        w->attributeToken(o.label, o.tokens, o.step, o.id);
    });
    QObject::connect(w, &MainWindow::runReady, w, [w, pending] {
        const RunResultPtr& run = w->state()->run();
        if (!run || pending->first == 0 || run->id != pending->first) return;
        w->state()->setPosition(pending->second);
        pending->first = 0;
    });

    QMenu* menu = w->menuBar()->addMenu(QObject::tr("&Chat"));
    QAction* showChat = menu->addAction(QObject::tr("Show the &Chat"), modes, [modes, chat] { modes->setCurrentWidget(chat); });
    showChat->setShortcut(QKeySequence(QObject::tr("Ctrl+Shift+C")));
    QAction* showExplorer = menu->addAction(QObject::tr("Show the &Explorer"), modes, [modes, explorer] { modes->setCurrentWidget(explorer); });
    showExplorer->setShortcut(QKeySequence(QObject::tr("Ctrl+Shift+E")));
    menu->addSeparator();
    menu->addAction(QObject::tr("&Stop Generating"), chat, &ChatPanel::stop);
    menu->addAction(QObject::tr("&Regenerate"), chat, &ChatPanel::regenerate);
    menu->addAction(QObject::tr("C&lear the Conversation"), chat, &ChatPanel::clearConversation);
    menu->addSeparator();
    menu->addAction(QObject::tr("Open the &Logits Explorer"), w, [w, modes, explorer, logits] {
        modes->setCurrentWidget(explorer);
        w->showView(logits);
    });
    menu->addAction(QObject::tr("Open the Logit &Lens"), w, [w, modes, explorer, lens] {
        modes->setCurrentWidget(explorer);
        w->showView(lens);
    });
}

}  // namespace strata::ui
