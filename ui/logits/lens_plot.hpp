#pragma once
// One token followed through the logit lens: its probability (log scale, left axis) and its rank (log scale,
// right axis, rank 1 at the top) after the embedding and after each block.
#include <vector>

#include <QWidget>

namespace strata::ui {

class LensPlot : public QWidget {
    Q_OBJECT
public:
    explicit LensPlot(QWidget* parent = nullptr);
    // Row 0 is x0, row i the residual after block i-1. vocab: for the rank axis.
    void setTrack(const QString& token, std::vector<double> prob, std::vector<int64_t> rank, int64_t vocab);
    bool hasData() const { return !prob_.empty(); }
    QSize sizeHint() const override { return {600, 300}; }

signals:
    void hoverText(const QString& text);

protected:
    void paintEvent(QPaintEvent*) override;
    void mouseMoveEvent(QMouseEvent*) override;

private:
    QRectF plotRect() const;
    double xOf(int row) const;
    QString rowName(int row) const;
    QString token_;
    std::vector<double> prob_;
    std::vector<int64_t> rank_;
    int64_t vocab_ = 1;
    double minLog_ = -8.0;
};

}  // namespace strata::ui
