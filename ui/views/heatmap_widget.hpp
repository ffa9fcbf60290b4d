#pragma once
// A heatmap of a [rows, cols] matrix: positions x features for activations, query x key for attention,
// out x in features for weights. Columns (and rows) wider than the widget are reduced per pixel to the value
// of largest magnitude in the bucket, so a single outlier feature among 4096 stays visible.
// Mouse: hover reads out the element under the cursor; wheel zooms features (Ctrl+wheel: rows) around the
// cursor; drag pans; double-click resets; click selects a row. Keys: + / - zoom, 0 resets.
#include <cstdint>
#include <vector>

#include <QImage>
#include <QStringList>
#include <QWidget>

#include "views/colormap.hpp"

namespace strata::ui {

class HeatmapWidget : public QWidget {
    Q_OBJECT
public:
    explicit HeatmapWidget(QWidget* parent = nullptr);

    // Row-major [rows, cols]. When each element stands for a rowStep x colStep bucket of a larger matrix (a
    // weight preview), the read-out reports indices of the larger matrix.
    void setMatrix(std::vector<float> data, int64_t rows, int64_t cols, int64_t rowStep = 1, int64_t colStep = 1);
    // No data: show a message instead.
    void clear(const QString& message);
    void setScaleKind(ColorScale::Kind kind);
    // A fixed value range (otherwise: diverging uses +-99th percentile of |x|, sequential min..max).
    void setFixedRange(float lo, float hi);
    void setAutoRange();
    void setAxisNames(const QString& rowName, const QString& colName);
    void setRowLabels(const QStringList& labels);
    void setColumnLabels(const QStringList& labels);
    void setSelectedRow(int row);  // -1: none
    void resetZoom();
    // Zooms the feature axis by `factor` (> 1 zooms in) keeping column `anchor` in place.
    void zoomColumns(double factor, double anchor);

    const ColorScale& scale() const { return scale_; }
    int64_t rows() const { return rows_; }
    int64_t cols() const { return cols_; }
    const std::vector<float>& data() const { return data_; }
    double visibleColumns() const { return colEnd_ - colStart_; }
    QRect plotRect() const;

    // The element under a widget point: in a reduced pixel, the one of largest magnitude.
    struct Probe {
        bool valid = false;
        int64_t row = 0, col = 0;            // the element reported (indices of the full matrix)
        int64_t colFirst = 0, colLast = 0;   // the columns the pixel covers (full matrix)
        int64_t rowFirst = 0, rowLast = 0;
        float value = 0.0f;
    };
    Probe probe(QPoint p) const;
    QString describe(const Probe& p) const;

    QSize sizeHint() const override { return {800, 360}; }
    QSize minimumSizeHint() const override { return {240, 120}; }

signals:
    void hoverChanged(const QString& text);
    void rowClicked(int row);

protected:
    void paintEvent(QPaintEvent*) override;
    void resizeEvent(QResizeEvent*) override;
    void mouseMoveEvent(QMouseEvent*) override;
    void mousePressEvent(QMouseEvent*) override;
    void mouseReleaseEvent(QMouseEvent*) override;
    void mouseDoubleClickEvent(QMouseEvent*) override;
    void wheelEvent(QWheelEvent*) override;
    void keyPressEvent(QKeyEvent*) override;
    void leaveEvent(QEvent*) override;

private:
    void updateRange();
    void rebuildImage();
    void clampView();
    // Columns [first, last) of the matrix that pixel column px of the plot covers.
    std::pair<int64_t, int64_t> pixelColumns(int px, int width) const;
    std::pair<int64_t, int64_t> pixelRows(int py, int height) const;
    int leftMargin() const;
    int bottomMargin() const;

    std::vector<float> data_;  // [rows_, cols_]
    int64_t rows_ = 0, cols_ = 0;
    int64_t rowStep_ = 1, colStep_ = 1;
    QString message_;
    ColorScale scale_;
    bool fixedRange_ = false;
    QString rowName_ = QStringLiteral("position");
    QString colName_ = QStringLiteral("feature");
    QStringList rowLabels_, colLabels_;
    int selectedRow_ = -1;

    double colStart_ = 0, colEnd_ = 0;  // visible columns (fractional when zoomed in)
    int64_t rowStart_ = 0, rowEnd_ = 0; // visible rows
    QImage image_;
    bool dirty_ = true;
    Probe hover_;
    QPoint pressPos_, lastPos_;
    bool dragging_ = false;
    double rowPanRemainder_ = 0;
};

}  // namespace strata::ui
