#pragma once
// Attention probabilities of the selected layer (layers.N.attention.probs): a grid of every head's T x T
// pattern (query rows, key columns, causal so the upper triangle is empty), and the selected head large with
// the tokens on both axes. Click a head in the grid to select it; click a row to select that query position.
// When the prompt repeats a token, each head carries its prefix-matching (induction) score, and a button names
// the strongest induction head of the whole model and goes to it.
#include <memory>
#include <utility>
#include <vector>

#include "views/view_page.hpp"

class QSpinBox;
class QToolButton;

namespace strata::ui {

class HeatmapWidget;
class HeadGrid;

class AttentionView : public ViewPage {
    Q_OBJECT
public:
    AttentionView(ExplorerState* state, EngineClient* client, QWidget* parent = nullptr);
    QString cardId() const override { return QStringLiteral("attention_probs"); }
    TensorExport tensorExport() const override;
    bool hasContent() const override;
    void setHead(int head);
    int head() const { return head_; }
    HeatmapWidget* headMap() const { return map_; }
    HeadGrid* grid() const { return grid_; }
    // The ablation spec of a head of the selected layer: "layers.L.attention.heads.H".
    QString headSpec(int head) const;
    // The context menu of a head (Ablate (zero) / (mean), or remove), as right-click shows it.
    void fillHeadMenu(QMenu* menu, int head);
    QToolButton* ablateButton() const { return ablate_; }
    // The prefix-matching score of every head of every layer for the current run ([layer][head]; empty when the
    // prompt repeats no token or attention was not kept), and the strongest head (-1, -1 without scores).
    const std::vector<std::vector<float>>& inductionScores() const { return induction_; }
    std::pair<int, int> strongestInductionHead() const { return strongest_; }
    QToolButton* strongestButton() const { return strongestButton_; }
    // Go to the strongest induction head once the next run is scored (the trained demo opens so: the tour's first
    // step); a run that repeats no token just clears the request.
    void goToStrongestHeadNext() { followStrongest_ = true; }

signals:
    void headChanged(int head);

private:
    void refresh();
    void showHeadMenu(int head, const QPoint& global);
    void scoreInduction();
    HeadGrid* grid_;
    HeatmapWidget* map_;
    QSpinBox* headBox_;
    QToolButton* ablate_;
    QToolButton* strongestButton_;
    int head_ = 0;
    std::weak_ptr<const RunResult> scoredRun_;  // the run the scores are of (weak: a hidden view keeps no old run)
    std::vector<std::vector<float>> induction_;
    std::pair<int, int> strongest_{-1, -1};
    bool followStrongest_ = false;
};

class HeadGrid : public QWidget {
    Q_OBJECT
public:
    explicit HeadGrid(QWidget* parent = nullptr);
    // probs: [heads * T, S] head-major (as traced); kvGroup: query heads per kv head (for labels).
    void setData(const float* probs, int heads, int T, int S, int kvGroup, QStringList tokens);
    void clear(const QString& message);
    void setSelected(int head, int position);
    // Diff mode: values are differences of probabilities, drawn with the diverging map over [-range, range].
    void setDiverging(bool on, float range);
    // Heads drawn with a red cross (ablated).
    void setMarked(const std::vector<bool>& marked);
    // Each head's prefix-matching score, shown after its label (empty: none shown); `best` is outlined.
    void setScores(std::vector<float> scores, int best);
    int headAt(QPoint p) const;
    int heads() const { return heads_; }
    QSize sizeHint() const override { return {420, 420}; }
signals:
    void headClicked(int head);
    void headMenuRequested(int head, const QPoint& global);
    void hoverChanged(const QString& text);
protected:
    void paintEvent(QPaintEvent*) override;
    void mouseMoveEvent(QMouseEvent*) override;
    void mousePressEvent(QMouseEvent*) override;
    void resizeEvent(QResizeEvent*) override;
    void contextMenuEvent(QContextMenuEvent*) override;
private:
    QRect cellRect(int head) const;
    void rebuild();
    std::vector<float> probs_;
    int heads_ = 0, T_ = 0, S_ = 0, kvGroup_ = 1, cols_ = 1;
    int selected_ = 0, position_ = -1;
    bool diverging_ = false;
    float range_ = 1.0f;
    std::vector<bool> marked_;
    std::vector<float> scores_;
    int best_ = -1;
    QStringList tokens_;
    QString message_;
    std::vector<QImage> images_;
};

}  // namespace strata::ui
