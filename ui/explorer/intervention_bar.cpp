#include "explorer/intervention_bar.hpp"

#include <QCheckBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QMenu>
#include <QToolButton>

#include "explorer/explorer_state.hpp"

namespace strata::ui {

InterventionBar::InterventionBar(ExplorerState* state, QWidget* parent) : QWidget(parent), state_(state) {
    setObjectName(QStringLiteral("interventionBar"));
    row_ = new QHBoxLayout(this);
    row_->setContentsMargins(0, 0, 0, 0);
    row_->setSpacing(4);
    auto* title = new QLabel(tr("Ablations"));
    title->setToolTip(tr("Interventions in force: every run repeats with them, and the views show the intervened pass"));
    row_->addWidget(title);
    hint_ = new QLabel(tr("none \u2014 right-click a head, a block, an FFN or a neuron to ablate it"));
    hint_->setToolTip(tr("A head in the Attention view, a block, attention or feed_forward in the atlas, a neuron (column) "
                         "of the ffn_hidden heatmap; or the Interventions toolbar"));
    hint_->setEnabled(false);
    row_->addWidget(hint_);
    row_->addStretch(1);
    diff_ = new QCheckBox(tr("diff"));
    diff_->setObjectName(QStringLiteral("diffToggle"));
    diff_->setToolTip(tr("Show each tensor of the intervened pass minus the clean pass's (only with ablations in force)"));
    row_->addWidget(diff_);
    clear_ = new QToolButton;
    clear_->setText(tr("Clear"));
    clear_->setToolTip(tr("Remove every ablation (the run repeats without them)"));
    row_->addWidget(clear_);
    connect(diff_, &QCheckBox::toggled, state_, &ExplorerState::setDiff);
    connect(state_, &ExplorerState::diffChanged, diff_, [this](bool on) {
        const QSignalBlocker b(diff_);
        diff_->setChecked(on);
    });
    connect(clear_, &QToolButton::clicked, state_, &ExplorerState::clearAblations);
    connect(state_, &ExplorerState::ablationsChanged, this, &InterventionBar::rebuild);
    rebuild();
}

void InterventionBar::rebuild() {
    for (QToolButton* b : chips_) b->deleteLater();
    chips_.clear();
    const QString style = QStringLiteral(
        "QToolButton { border: 1px solid #c01c28; border-radius: 6px; padding: 2px 6px; background: #fbe3e4; color: #58151c; }"
        "QToolButton:hover { background: #f6c6c9; }");
    const AblationList& list = state_->ablations();
    for (size_t i = 0; i < list.size(); ++i) {
        const AblationSpec a = list[i];
        auto* b = new QToolButton;
        b->setText(a.label() + QStringLiteral("  \u2715"));
        b->setToolTip(tr("%1 is %2; click to remove it").arg(a.spec, a.mean ? tr("replaced by its mean over the prompt's positions") : tr("zero")));
        b->setStyleSheet(style);
        connect(b, &QToolButton::clicked, state_, [this, spec = a.spec] { state_->removeAblation(spec); });
        row_->insertWidget(1 + int(i), b);
        chips_.push_back(b);
    }
    hint_->setVisible(list.empty());
    clear_->setEnabled(!list.empty());
    diff_->setEnabled(!list.empty());
}

void addAblationActions(QMenu* menu, ExplorerState* state, const QString& spec, const QString& what) {
    if (state->isAblated(spec)) {
        menu->addAction(QObject::tr("Remove the ablation of %1").arg(what), state, [state, spec] { state->removeAblation(spec); });
        return;
    }
    QAction* zero = menu->addAction(QObject::tr("Ablate %1 (zero)").arg(what), state, [state, spec] { state->addAblation({spec, false}); });
    zero->setToolTip(spec);
    QAction* mean = menu->addAction(QObject::tr("Ablate %1 (mean)").arg(what), state, [state, spec] { state->addAblation({spec, true}); });
    mean->setToolTip(QObject::tr("%1, replaced by its mean over the prompt's positions in the clean run").arg(spec));
}

}  // namespace strata::ui
