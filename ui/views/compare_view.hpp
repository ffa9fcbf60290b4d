#pragma once
// Two prompts side by side, clean and corrupt (same token length): where in the residual stream they differ
// (||h_corrupt - h_clean|| and cos(h_clean, h_corrupt) per layer and position), which tokens' logits rose and
// fell at the last position, and the activation-patching sweep (causal tracing): for every layer L and position
// p, the corrupt run with the clean run's activation at (site of L, p) patched in, scored by
// logit[answer] - logit[foil] at the last position. Runs on the backend with progress and cancel.
#include "strata/intervention.hpp"
#include "views/view_page.hpp"

class QComboBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QTableWidget;

namespace strata::ui {

class HeatmapWidget;

class CompareView : public ViewPage {
    Q_OBJECT
public:
    CompareView(ExplorerState* state, EngineClient* client, QWidget* parent = nullptr);
    QString cardId() const override { return QStringLiteral("compare"); }
    TensorExport tensorExport() const override;
    bool hasContent() const override;

    // A fact the demonstration model learned (its training text names 28 capitals): which layer and position
    // carry the country into the answer.
    static constexpr const char* kDefaultClean = "The capital of France is Paris, and the capital of Germany is";
    static constexpr const char* kDefaultCorrupt = "The capital of France is Paris, and the capital of Italy is";

    void setPrompts(const QString& clean, const QString& corrupt);
    void compare();       // runs both prompts (compareFinished fills the maps and the pickers)
    void runSweep();      // the patching sweep with the chosen site, answer and foil
    void cancelSweep();
    void setSite(PatchSite site);
    void setAnswer(int32_t id);  // also accepts ids that are not among the candidates
    void setFoil(int32_t id);
    // 0: (effect - corrupt) / (clean - corrupt), 1: effect - corrupt
    void setScaleMode(int mode);
    bool sweeping() const { return sweepId_ != 0; }
    bool comparing() const { return compareId_ != 0; }

    const CompareResultPtr& compareResult() const { return compare_; }
    const SweepResultPtr& sweepResult() const { return sweep_; }
    HeatmapWidget* normMap() const { return normMap_; }
    HeatmapWidget* cosineMap() const { return cosMap_; }
    HeatmapWidget* sweepMap() const { return sweepMap_; }
    QProgressBar* progressBar() const { return progress_; }
    QPushButton* sweepButton() const { return sweepButton_; }
    QPushButton* cancelButton() const { return cancel_; }
    QTableWidget* changes() const { return changes_; }
    QString sweepStatus() const;

signals:
    void compareReady();
    void sweepReady();
    void sweepCancelled();

private:
    void onCompare(const CompareResultPtr& r);
    void onSweep(const SweepResultPtr& r);
    void showSweep();
    void fillPicker(QComboBox* box, int32_t select);
    int32_t pickerId(const QComboBox* box) const;
    QStringList positionLabels() const;
    void setSweeping(bool on);

    QLineEdit* clean_;
    QLineEdit* corrupt_;
    QPushButton* compareButton_;
    QLabel* info_;
    HeatmapWidget* normMap_;
    HeatmapWidget* cosMap_;
    QTableWidget* changes_;
    QComboBox* site_;
    QComboBox* answer_;
    QComboBox* foil_;
    QComboBox* scale_;
    QPushButton* sweepButton_;
    QPushButton* cancel_;
    QProgressBar* progress_;
    QLabel* sweepInfo_;
    HeatmapWidget* sweepMap_;

    qint64 compareId_ = 0, sweepId_ = 0;
    CompareResultPtr compare_;
    SweepResultPtr sweep_;
};

}  // namespace strata::ui
