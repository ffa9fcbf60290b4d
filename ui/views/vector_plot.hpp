#pragma once
// A vector over its index (a gain over features, an embedding row): each pixel column draws the min..max of the
// elements it covers, so a single extreme feature among thousands stays visible. Marked indices (outliers) are
// drawn as dots with their index. Hover reads out the extreme element under the cursor; wheel zooms; drag pans;
// double-click resets.
#include <cstdint>
#include <optional>
#include <vector>

#include <QWidget>

namespace strata::ui {

class VectorPlot : public QWidget {
    Q_OBJECT
public:
    explicit VectorPlot(QWidget* parent = nullptr);

    void setVector(std::vector<float> values, const QString& indexName, const QString& valueName);
    void clear(const QString& message);
    void setMarked(std::vector<int64_t> indices);
    void setReferenceLine(std::optional<float> y);  // e.g. 1 for gains (their initial value), 0 for embeddings
    const std::vector<float>& values() const { return values_; }

    QSize sizeHint() const override { return {800, 240}; }

signals:
    void hoverChanged(const QString& text);

protected:
    void paintEvent(QPaintEvent*) override;
    void mouseMoveEvent(QMouseEvent*) override;
    void mousePressEvent(QMouseEvent*) override;
    void mouseDoubleClickEvent(QMouseEvent*) override;
    void wheelEvent(QWheelEvent*) override;
    void leaveEvent(QEvent*) override;

private:
    QRect plotRect() const;
    std::pair<int64_t, int64_t> pixelRange(int px, int width) const;
    double yOf(float v, const QRect& p) const;

    std::vector<float> values_;
    std::vector<int64_t> marked_;
    std::optional<float> reference_;
    QString indexName_, valueName_, message_;
    float lo_ = 0, hi_ = 1;
    double start_ = 0, end_ = 0;  // visible index range
    int hoverPx_ = -1;
    QPoint lastPos_;
};

}  // namespace strata::ui
