#pragma once
// The selected part's tensor as a heatmap: its traced activation ([T, d] positions x features, or the attention
// probabilities), or its weight (reduced on the worker so that outliers survive). Follows the atlas selection,
// the layer stepper (same part, next layer) and the selected position.
#include <QHash>

#include "views/view_page.hpp"

class QComboBox;
class QLabel;
class QRadioButton;

namespace strata::ui {

class HeatmapWidget;

class TensorView : public ViewPage {
    Q_OBJECT
public:
    TensorView(ExplorerState* state, EngineClient* client, QWidget* parent = nullptr);

    QString cardId() const override;
    TensorExport tensorExport() const override;
    void exportNpy(const QString& file) override;
    bool hasContent() const override;
    bool showingWeight() const { return showWeight_; }
    // Shows the weight (true) or the activation (false) of the selected part, when it has one.
    void setShowWeight(bool weight);
    HeatmapWidget* heatmap() const { return heatmap_; }
    // The canonical name of what is shown now.
    QString shownName() const;
    // The ablation spec for column `col` of the shown activation: a neuron of layers.L.ffn_hidden, a head of
    // layers.L.attention.heads; empty for other tensors.
    QString columnSpec(int64_t col) const;

private:
    void refresh();
    void showActivation(const QString& name);
    void showWeight(const QString& name);
    void onPreview(const WeightPreviewPtr& p);
    void showColumnMenu(const QPoint& pos);

    HeatmapWidget* heatmap_;
    QLabel* name_;
    QRadioButton* activationButton_;
    QRadioButton* weightButton_;
    QComboBox* range_;
    bool showWeight_ = false;
    qint64 pendingPreview_ = 0;
    QString pendingName_;
    QHash<QString, WeightPreviewPtr> previews_;  // by weight name, for the current model
};

}  // namespace strata::ui
