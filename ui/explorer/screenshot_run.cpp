#include "explorer/screenshot_run.hpp"

#include <cstdio>

#include <QDir>
#include <QTimer>

#include "chat/chat_screenshots.hpp"
#include "explorer/main_window.hpp"
#include "views/attention_view.hpp"
#include "views/embedding_view.hpp"
#include "views/gains_view.hpp"
#include "views/logits_view.hpp"
#include "views/norms_view.hpp"
#include "views/strata_view.hpp"
#include "views/tensor_view.hpp"

namespace strata::ui {

namespace {
constexpr int kTimeoutMs = 60000;
constexpr int kSettleMs = 400;  // let layouts and repaints settle before grabbing
}  // namespace

ScreenshotRun::ScreenshotRun(MainWindow* w, const QString& dir, QObject* parent) : QObject(parent), window_(w), dir_(dir) {
    ExplorerState* st = w->state();
    const int mid = 1;  // a block in the middle of the demonstration model's four
    shots_ = {
        {QStringLiteral("01-tensor-residual"),
         [w, st, mid] {
             w->selectPart(QStringLiteral("block"), mid);
             w->showView(w->tensorView());
             st->setPosition(st->positions() - 1);
         },
         [w] { return w->tensorView()->hasContent(); }},
        {QStringLiteral("02-tensor-ffn-hidden"),
         [w, mid] {
             w->selectPart(QStringLiteral("block/feed_forward/swiglu"), mid);
             w->showView(w->tensorView());
         },
         [w] { return w->tensorView()->hasContent(); }},
        {QStringLiteral("03-tensor-weight-wq"),
         [w] {
             w->selectPart(QStringLiteral("block/attention/wq"), 0);
             w->showView(w->tensorView());
             w->tensorView()->setShowWeight(true);
         },
         [w] { return w->tensorView()->showingWeight() && w->tensorView()->hasContent(); }},
        {QStringLiteral("04-strata"),
         [w, mid] {
             w->tensorView()->setShowWeight(false);
             w->selectPart(QStringLiteral("block"), mid);
             w->showView(w->strataView());
         },
         [w] { return w->strataView()->hasContent(); }},
        {QStringLiteral("05-residual-norms"),
         [w, mid] {
             w->showView(w->normsView());
             w->selectPart(QStringLiteral("block"), mid);
         },
         [w] { return w->normsView()->hasContent(); }},
        {QStringLiteral("06-rmsnorm-gains"),
         [w, mid] {
             w->showView(w->gainsView());
             w->selectPart(QStringLiteral("block/ffn_norm"), mid);
         },
         [w] { return w->gainsView()->hasContent(); }},
        {QStringLiteral("07-attention"),
         [w, st, mid] {
             w->selectPart(QStringLiteral("block/attention/softmax"), mid);
             w->showView(w->attentionView());
             w->attentionView()->setHead(2);
             st->setPosition(st->positions() - 1);
         },
         [w] { return w->attentionView()->hasContent(); }},
        {QStringLiteral("08-token-embeddings"),
         [w, st] {
             w->showView(w->embeddingView());
             w->selectPart(QStringLiteral("tok_embeddings"), -1);
             st->setPosition(std::min(3, st->positions() - 1));
         },
         [w] { return w->embeddingView()->hasContent() && !w->busy(); }},
        {QStringLiteral("09-logits"),
         [w, st] {
             w->selectPart(QStringLiteral("output"), -1);
             w->showView(w->logitsView());
             st->setPosition(st->positions() - 1);
         },
         [w] { return w->logitsView()->hasContent(); }},
    };
    // Then the chat and the logits explorer (ui/chat/chat_screenshots.cpp).
    for (ChatShot& s : chatScreenshots(w)) shots_.push_back({s.name, std::move(s.setup), std::move(s.ready)});
    connect(w, &MainWindow::runReady, this, [this] { runDone_ = true; });
    connect(w, &MainWindow::lensReady, this, [this] { lensDone_ = true; });
    connect(w, &MainWindow::failed, this, [this](const QString& m) {
        std::fprintf(stderr, "strata --screenshot-dir: %s\n", qPrintable(m));
        emit finished(1);
    });
}

void ScreenshotRun::start() {
    QDir().mkpath(dir_);
    waited_.start();
    poll();
}

void ScreenshotRun::poll() {
    if (waited_.elapsed() > kTimeoutMs) {
        std::fprintf(stderr, "strata --screenshot-dir: timed out waiting for %s\n",
                     index_ < shots_.size() ? qPrintable(shots_[index_].name) : "the model and the first run");
        emit finished(1);
        return;
    }
    if (!runDone_ || !lensDone_) {
        QTimer::singleShot(100, this, &ScreenshotRun::poll);
        return;
    }
    if (!started_) {
        started_ = true;
        next();
        return;
    }
    if (index_ >= shots_.size()) {
        emit finished(0);
        return;
    }
    const Shot& shot = shots_[index_];
    if (!shot.ready()) {
        QTimer::singleShot(100, this, &ScreenshotRun::poll);
        return;
    }
    QTimer::singleShot(kSettleMs, this, [this] {
        const QString file = QDir(dir_).filePath(shots_[index_].name + ".png");
        if (!window_->grab().save(file, "PNG")) {
            std::fprintf(stderr, "strata --screenshot-dir: cannot write %s\n", qPrintable(file));
            emit finished(1);
            return;
        }
        std::printf("%s\n", qPrintable(file));
        std::fflush(stdout);
        ++index_;
        next();
    });
}

void ScreenshotRun::next() {
    if (index_ < shots_.size()) shots_[index_].setup();
    waited_.restart();
    QTimer::singleShot(50, this, &ScreenshotRun::poll);
}

}  // namespace strata::ui
