#include "explorer/screenshot_run.hpp"

#include <cstdio>

#include <QDir>
#include <QSplitter>
#include <QTimer>

#include "chat/chat_screenshots.hpp"
#include "explorer/main_window.hpp"
#include "views/attention_view.hpp"
#include "views/attribution_view.hpp"
#include "views/compare_view.hpp"
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
             // The strongest induction head where the prompt repeats a span (the trained demo's default), else head 2.
             const auto [layer, head] = w->attentionView()->strongestInductionHead();
             w->selectPart(QStringLiteral("block/attention/softmax"), layer >= 0 ? layer : mid);
             w->showView(w->attentionView());
             w->attentionView()->setHead(head >= 0 ? head : 2);
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
        // The causal tools (issue 12): a head ablated and the diff with the clean run, the compare view with its
        // patching sweep, and attribution. The last setup clears the ablations so the chat's runs are plain.
        {QStringLiteral("10-ablation-heads-diff"),
         [st] {
             // The head docs/interventions.md finds on the random-weights model and its prompt (the largest direct attribution).
             st->setAblations({{QStringLiteral("layers.2.attention.heads.3"), false}});
         },
         [w, st] {
             if (w->busy() || !st->run() || !st->run()->clean) return false;
             if (!st->diff()) {
                 st->setDiff(true);
                 w->selectPart(QStringLiteral("block/attention/heads"), 2);
                 w->showView(w->tensorView());
             }
             return w->tensorView()->hasContent();
         }},
        {QStringLiteral("11-ablation-attention-diff"),
         [w, st] {
             w->selectPart(QStringLiteral("block/attention/softmax"), 3);
             w->showView(w->attentionView());
             w->attentionView()->setHead(1);
             st->setPosition(st->positions() - 1);
         },
         [w] { return w->attentionView()->hasContent(); }},
        {QStringLiteral("12-compare-sweep"),
         [w, st] {
             st->setDiff(false);
             st->clearAblations();
             w->splitter()->setSizes({250, 1050, 300});  // room for the four panels
             w->showView(w->compareView());
             w->compareView()->compare();
         },
         [w] {
             CompareView* cv = w->compareView();
             if (!cv->compareResult() || cv->comparing()) return false;
             if (!cv->sweepResult() && !cv->sweeping()) cv->runSweep();
             return cv->sweepResult() != nullptr && !w->busy();
         }},
        {QStringLiteral("13-attribution"),
         [w, st] {
             st->setPosition(st->positions() - 1);
             w->showView(w->attributionView());
         },
         [w] {
             AttributionView* v = w->attributionView();
             return !w->busy() && v->hasContent() && !v->busy() && v->result()->ablations.empty();
         }},
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
