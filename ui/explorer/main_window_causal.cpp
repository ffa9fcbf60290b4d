// The main window's causal tools (issue 12): ablation from the views with the run repeated, the ablations'
// menu and toolbar, the compare view (clean / corrupt prompts and the patching sweep) and the attribution view.
// Part of MainWindow (main_window.hpp), kept apart so that main_window.cpp stays about the explorer's frame.
#include <QAction>
#include <QCheckBox>
#include <QMenu>
#include <QMenuBar>
#include <QRegularExpression>
#include <QStatusBar>
#include <QTabWidget>
#include <QToolBar>
#include <QTreeView>

#include "explorer/atlas_model.hpp"
#include "explorer/engine_client.hpp"
#include "explorer/intervention_bar.hpp"
#include "explorer/main_window.hpp"
#include "views/attention_view.hpp"
#include "views/attribution_view.hpp"
#include "views/compare_view.hpp"
#include "views/tensor_view.hpp"

namespace strata::ui {

void MainWindow::buildCausal() {
    compareView_ = new CompareView(state_, client_);
    attributionView_ = new AttributionView(state_, client_);
    for (ViewPage* v : {static_cast<ViewPage*>(compareView_), static_cast<ViewPage*>(attributionView_)}) {
        tabs_->addTab(v, v->tabName());
        connect(v, &ViewPage::cardChanged, this, &MainWindow::updateCard);
        connect(v, &ViewPage::message, this, [this](const QString& m) { statusBar()->showMessage(m, 8000); });
    }

    // Every run repeats with the ablations in force.
    connect(state_, &ExplorerState::ablationsChanged, this, &MainWindow::rerun);

    // The atlas: right-click a block, its attention or its feed_forward.
    tree_->setContextMenuPolicy(Qt::CustomContextMenu);
    connect(tree_, &QWidget::customContextMenuRequested, this, [this](const QPoint& pos) {
        const QModelIndex index = tree_->indexAt(pos);
        const int layer = atlas_->layer(index);
        if (!index.isValid() || layer < 0 || !state_->run()) return;
        const QString key = atlas_->part(index).key;
        QString spec, what;
        if (key == QLatin1String("block")) {
            spec = QStringLiteral("layers.%1").arg(layer);
            what = tr("block layers.%1 (skip it)").arg(layer);
        } else if (key == QLatin1String("block/attention")) {
            spec = QStringLiteral("layers.%1.attention").arg(layer);
            what = tr("the attention of layers.%1").arg(layer);
        } else if (key == QLatin1String("block/feed_forward")) {
            spec = QStringLiteral("layers.%1.feed_forward").arg(layer);
            what = tr("the feed_forward of layers.%1").arg(layer);
        } else {
            return;
        }
        QMenu menu;
        addAblationActions(&menu, state_, spec, what);
        menu.exec(tree_->viewport()->mapToGlobal(pos));
    });

    // The Interventions menu and toolbar: ablate what is selected, clear, diff, and the two views.
    QMenu* menu = menuBar()->addMenu(tr("&Interventions"));
    QToolBar* bar = addToolBar(tr("Interventions"));
    bar->setObjectName(QStringLiteral("interventionsToolbar"));
    ablateZero_ = new QAction(tr("Ablate (zero)"), this);
    ablateZero_->setObjectName(QStringLiteral("actionAblateZero"));
    ablateZero_->setShortcut(QKeySequence(tr("Ctrl+Shift+A")));
    ablateMean_ = new QAction(tr("Ablate (mean)"), this);
    ablateMean_->setObjectName(QStringLiteral("actionAblateMean"));
    QAction* clear = new QAction(tr("Clear Ablations"), this);
    QAction* diff = new QAction(tr("Diff with the Clean Run"), this);
    diff->setObjectName(QStringLiteral("actionDiff"));
    diff->setCheckable(true);
    diff->setShortcut(QKeySequence(tr("Ctrl+Shift+D")));
    QAction* compare = new QAction(tr("Compare Prompts"), this);
    QAction* attribute = new QAction(tr("Attribute the Selected Position"), this);
    for (QAction* a : {ablateZero_, ablateMean_, clear, diff}) {
        menu->addAction(a);
        bar->addAction(a);
    }
    menu->addSeparator();
    bar->addSeparator();
    for (QAction* a : {compare, attribute}) {
        menu->addAction(a);
        bar->addAction(a);
    }
    auto ablate = [this](bool mean) {
        const QString spec = ablationTarget();
        if (!spec.isEmpty()) state_->addAblation({spec, mean});
    };
    connect(ablateZero_, &QAction::triggered, this, [ablate] { ablate(false); });
    connect(ablateMean_, &QAction::triggered, this, [ablate] { ablate(true); });
    connect(clear, &QAction::triggered, state_, &ExplorerState::clearAblations);
    connect(diff, &QAction::toggled, state_, &ExplorerState::setDiff);
    connect(state_, &ExplorerState::diffChanged, diff, [diff](bool on) {
        const QSignalBlocker b(diff);
        diff->setChecked(on);
    });
    connect(compare, &QAction::triggered, this, [this] { showView(compareView_); });
    connect(attribute, &QAction::triggered, this, [this] {
        showView(attributionView_);
        attributionView_->attribute();
    });
    auto updateAblate = [this] {
        QString what;
        const QString spec = ablationTarget(&what);
        for (QAction* a : {ablateZero_, ablateMean_}) {
            a->setEnabled(!spec.isEmpty() && state_->run() && !state_->isAblated(spec));
            a->setToolTip(spec.isEmpty() ? tr("Select a head (Attention), or a block, attention or feed_forward in the atlas")
                                         : tr("Ablate %1 (%2)").arg(what, spec));
        }
        ablateZero_->setText(spec.isEmpty() ? tr("Ablate (zero)") : tr("Ablate %1 (zero)").arg(spec));
        ablateMean_->setText(spec.isEmpty() ? tr("Ablate (mean)") : tr("Ablate %1 (mean)").arg(spec));
    };
    connect(state_, &ExplorerState::partChanged, this, updateAblate);
    connect(state_, &ExplorerState::layerChanged, this, updateAblate);
    connect(state_, &ExplorerState::runChanged, this, updateAblate);
    connect(state_, &ExplorerState::ablationsChanged, this, updateAblate);
    connect(tabs_, &QTabWidget::currentChanged, this, updateAblate);
    connect(attentionView_, &AttentionView::headChanged, this, updateAblate);
    updateAblate();

    // An attribution bar opens its component's tensor.
    connect(attributionView_, &AttributionView::componentRequested, this, [this](const QString& name) {
        static const QRegularExpression head(QStringLiteral("^layers\\.(\\d+)\\.attention\\.heads\\.(\\d+)$"));
        static const QRegularExpression ffn(QStringLiteral("^layers\\.(\\d+)\\.feed_forward$"));
        if (name == QLatin1String("x0")) {
            selectPart(QStringLiteral("tok_embeddings"), -1);
        } else if (const auto m = head.match(name); m.hasMatch()) {
            const int layer = m.captured(1).toInt(), h = m.captured(2).toInt();
            selectPart(QStringLiteral("block/attention/heads"), layer);
            attentionView_->setHead(h);
            const int64_t hd = state_->model() ? state_->model()->config.head_dim : 0;
            statusBar()->showMessage(tr("%1 is columns %2 to %3 of layers.%4.attention.heads").arg(name).arg(h * hd).arg((h + 1) * hd - 1).arg(layer), 10000);
        } else if (const auto f = ffn.match(name); f.hasMatch()) {
            selectPart(QStringLiteral("block/feed_forward"), f.captured(1).toInt());
        } else {
            return;
        }
        showView(tensorView_);
    });

    // "What made this token" (the chat): once its run is in, attribute the token there.
    connect(this, &MainWindow::runReady, this, [this] {
        const RunResultPtr& run = state_->run();
        if (!run || pendingAttribution_.run == 0 || run->id != pendingAttribution_.run) return;
        pendingAttribution_.run = 0;
        state_->setPosition(pendingAttribution_.position);
        showView(attributionView_);
        attributionView_->attribute(pendingAttribution_.position, pendingAttribution_.target);
    });
}

QString MainWindow::ablationTarget(QString* what) const {
    const int layer = state_->layer();
    QString spec, name;
    if (tabs_->currentWidget() == attentionView_) {
        spec = attentionView_->headSpec(attentionView_->head());
        name = tr("head %1 of layers.%2").arg(attentionView_->head()).arg(layer);
    } else {
        const QString key = state_->part().key;
        if (key == QLatin1String("block")) {
            spec = QStringLiteral("layers.%1").arg(layer);
            name = tr("block layers.%1").arg(layer);
        } else if (key.startsWith(QLatin1String("block/attention"))) {
            spec = QStringLiteral("layers.%1.attention").arg(layer);
            name = tr("the attention of layers.%1").arg(layer);
        } else if (key.startsWith(QLatin1String("block/feed_forward"))) {
            spec = QStringLiteral("layers.%1.feed_forward").arg(layer);
            name = tr("the feed_forward of layers.%1").arg(layer);
        }
    }
    if (what) *what = name;
    return state_->model() ? spec : QString();
}

void MainWindow::rerun() {
    const RunResultPtr& run = state_->run();
    if (!state_->model() || !run) return;  // nothing to repeat (a new model clears its ablations before its first run)
    if (runId_) client_->cancelUpTo(runId_);  // a newer run replaces one still in flight
    runId_ = client_->runTokens(run->prompt, run->tokens, lens_->isChecked(), state_->ablations());
    statusBar()->showMessage(state_->ablations().empty() ? tr("Running again without ablations\u2026")
                                                         : tr("Running again with %n ablation(s)\u2026", nullptr, int(state_->ablations().size())));
}

void MainWindow::attributeToken(const QString& label, const std::vector<int32_t>& tokens, int position, int32_t target) {
    const qint64 id = runTokens(label, tokens, false);
    if (id == 0) return;
    pendingAttribution_ = {id, position, target};
}

}  // namespace strata::ui
