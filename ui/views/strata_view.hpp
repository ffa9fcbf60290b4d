#pragma once
// The strata overview: the residual stream as a layers x positions grid (x0 at the bottom, the last block's
// output on top). Each cell is coloured by the residual's norm at that layer and position; with the logit lens
// it also shows the token that layer's residual would predict through the final norm and output, and can be
// coloured by that token's probability. Click a cell to select that layer and position; double-click opens it.
#include <vector>

#include "views/view_page.hpp"

class QComboBox;

namespace strata::ui {

class StrataGrid;

class StrataView : public ViewPage {
    Q_OBJECT
public:
    StrataView(ExplorerState* state, EngineClient* client, QWidget* parent = nullptr);
    QString cardId() const override { return QStringLiteral("h"); }
    TensorExport tensorExport() const override;
    bool hasContent() const override;
    StrataGrid* grid() const { return grid_; }

signals:
    // Select the part `key` (Part::key) in block `layer` (-1: outside blocks).
    void partRequested(const QString& key, int layer);
    void openTensorRequested();

private:
    void refresh();
    StrataGrid* grid_;
    QComboBox* colour_;
};

// The painted grid (also used by tests).
class StrataGrid : public QWidget {
    Q_OBJECT
public:
    explicit StrataGrid(QWidget* parent = nullptr);
    enum class Colour { Norm, LensProbability };
    // norms: [rows, T], row 0 = x0, row r = h.{r-1}
    void setData(std::vector<float> norms, int rows, int positions, QStringList rowNames, QStringList tokens);
    // Lens top tokens [rows, T] (text) and probabilities; empty to clear.
    void setLens(QStringList top, std::vector<float> prob);
    void setColour(Colour c);
    void setSelection(int row, int position);
    const std::vector<float>& norms() const { return norms_; }
    int rows() const { return rows_; }
    int positions() const { return positions_; }
    // Where the cell of `row` (0 = x0) and `position` is drawn.
    QRect cellRect(int row, int position) const;
    QSize sizeHint() const override { return {900, 500}; }

signals:
    void hoverChanged(const QString& text);
    void cellClicked(int row, int position);
    void cellDoubleClicked(int row, int position);

protected:
    void paintEvent(QPaintEvent*) override;
    void mouseMoveEvent(QMouseEvent*) override;
    void mousePressEvent(QMouseEvent*) override;
    void mouseDoubleClickEvent(QMouseEvent*) override;

private:
    QRect gridRect() const;
    bool cellAt(QPoint p, int* row, int* position) const;
    float cellValue(int row, int position) const;  // what the colour shows, mapped to [0, 1]

    std::vector<float> norms_;  // [rows_, positions_]
    std::vector<float> prob_;   // [rows_, positions_] or empty
    QStringList top_;           // [rows_ * positions_] or empty
    QStringList rowNames_, tokens_;
    int rows_ = 0, positions_ = 0;
    int selRow_ = -1, selPos_ = -1;
    Colour colour_ = Colour::Norm;
    float logMin_ = 0, logMax_ = 1;
};

}  // namespace strata::ui
