#pragma once
// The ablations in force, as removable chips in a row under the prompt (the token chips' style), with the
// diff toggle (each tensor shown minus the clean run's) and a button that clears them all. The chips are the
// explorer state's list: adding one anywhere (the attention view, the atlas, the FFN heatmap) shows it here.
#include <vector>

#include <QWidget>

class QCheckBox;
class QHBoxLayout;
class QLabel;
class QMenu;
class QToolButton;

namespace strata::ui {

class ExplorerState;

class InterventionBar : public QWidget {
    Q_OBJECT
public:
    explicit InterventionBar(ExplorerState* state, QWidget* parent = nullptr);
    int count() const { return int(chips_.size()); }
    QToolButton* chip(int i) const { return chips_[size_t(i)]; }
    QCheckBox* diffToggle() const { return diff_; }

private:
    void rebuild();
    ExplorerState* state_;
    QHBoxLayout* row_;
    QLabel* hint_;
    QCheckBox* diff_;
    QToolButton* clear_;
    std::vector<QToolButton*> chips_;
};

// "Ablate (zero)" and "Ablate (mean)" for `spec` (an ablation spec of intervention.hpp), or "Remove the
// ablation" when it is in force, added to a context menu. `what` names it for a person ("head 5 of layers.3").
void addAblationActions(QMenu* menu, ExplorerState* state, const QString& spec, const QString& what);

}  // namespace strata::ui
