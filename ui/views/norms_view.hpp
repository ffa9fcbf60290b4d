#pragma once
// Residual norms: how long the residual vector of each position is after every layer (x0, h.0 .. h.{N-1}),
// the selected position drawn bold; and, per block, how much its attention (||attention_out||) and its
// feed-forward (||ffn_out||) added at the selected position. Click a layer to select it.
#include <vector>

#include "views/view_page.hpp"

namespace strata::ui {

// The numbers both plots draw, computed once per run from the kept trace.
struct ResidualNorms {
    int layers = 0, positions = 0;
    std::vector<float> residual;   // [layers + 1, T]: x0, h.0 .. h.{N-1}
    std::vector<float> attention;  // [layers, T]: ||attention_out||
    std::vector<float> ffn;        // [layers, T]: ||ffn_out||
    static ResidualNorms from(const ExplorerState& state);
};

class NormLinesPlot;
class ContributionPlot;

class NormsView : public ViewPage {
    Q_OBJECT
public:
    NormsView(ExplorerState* state, EngineClient* client, QWidget* parent = nullptr);
    QString cardId() const override { return QStringLiteral("h"); }
    TensorExport tensorExport() const override;
    bool hasContent() const override { return norms_.positions > 0; }
    const ResidualNorms& norms() const { return norms_; }

signals:
    void partRequested(const QString& key, int layer);

private:
    void refresh();
    ResidualNorms norms_;
    NormLinesPlot* lines_;
    ContributionPlot* bars_;
};

class NormLinesPlot : public QWidget {
    Q_OBJECT
public:
    explicit NormLinesPlot(QWidget* parent = nullptr);
    void setData(const ResidualNorms* n, QStringList tokens);
    void setSelection(int layerRow, int position);
    void setLogScale(bool on);
    QSize sizeHint() const override { return {800, 300}; }
signals:
    void hoverChanged(const QString& text);
    void rowClicked(int row);  // 0 = x0, r = h.{r-1}
protected:
    void paintEvent(QPaintEvent*) override;
    void mouseMoveEvent(QMouseEvent*) override;
    void mousePressEvent(QMouseEvent*) override;
private:
    QRect plotRect() const;
    int rowAt(int x) const;
    double yOf(float v, const QRect& p) const;
    const ResidualNorms* n_ = nullptr;
    QStringList tokens_;
    int selRow_ = -1, selPos_ = -1;
    bool log_ = false;
    float lo_ = 0, hi_ = 1;
};

class ContributionPlot : public QWidget {
    Q_OBJECT
public:
    explicit ContributionPlot(QWidget* parent = nullptr);
    void setData(const ResidualNorms* n, QStringList tokens);
    void setSelection(int layer, int position);
    QSize sizeHint() const override { return {800, 220}; }
signals:
    void hoverChanged(const QString& text);
    void layerClicked(int layer, bool feedForward);
protected:
    void paintEvent(QPaintEvent*) override;
    void mouseMoveEvent(QMouseEvent*) override;
    void mousePressEvent(QMouseEvent*) override;
private:
    QRect plotRect() const;
    bool barAt(QPoint p, int* layer, bool* ffn) const;
    const ResidualNorms* n_ = nullptr;
    QStringList tokens_;
    int selLayer_ = -1, selPos_ = -1;
};

}  // namespace strata::ui
