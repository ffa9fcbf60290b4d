#pragma once
// Direct logit attribution of one token's logit at one position of the run (causal.hpp's attribute): with the
// final RMSNorm's scale at that position held fixed, the logit is exactly a sum over the residual stream's
// parts, x0, every head (its output through its slice of wo) and every feed_forward, each projected through
// norm.weight and the token's row of output. One bar per part, sorted by |value| or in layer order; clicking a
// bar opens that part's tensor. The target is the top-1 token at the position unless another is chosen.
#include "views/view_page.hpp"

class QComboBox;
class QLabel;
class QScrollArea;
class QSpinBox;

namespace strata::ui {

class AttributionBars;

class AttributionView : public ViewPage {
    Q_OBJECT
public:
    AttributionView(ExplorerState* state, EngineClient* client, QWidget* parent = nullptr);
    QString cardId() const override { return QStringLiteral("attribution"); }
    TensorExport tensorExport() const override;
    bool hasContent() const override;

    // Attributes `target` (-1: the top-1 token) at `position` (-1: the selected one) of the current run.
    void attribute(int position = -1, int32_t target = -1);
    void setSortByMagnitude(bool on);
    const AttributionResultPtr& result() const { return result_; }
    AttributionBars* bars() const { return bars_; }
    bool busy() const { return pending_ != 0; }
    QString summary() const;

signals:
    void ready();
    // A bar was clicked: "x0", "layers.L.attention.heads.H" or "layers.L.feed_forward".
    void componentRequested(const QString& name);

protected:
    void showEvent(QShowEvent* e) override;

private:
    void onResult(const AttributionResultPtr& r);
    void fillTargets(int position);
    void scheduleAuto();

    QSpinBox* position_;
    QComboBox* target_;
    QComboBox* sort_;
    QLabel* summary_;
    QScrollArea* scroll_;
    AttributionBars* bars_;
    qint64 pending_ = 0;
    AttributionResultPtr result_;
    bool stale_ = true;
};

// The bars: one row per component, a zero line in the middle, positive to the right (red), negative to the
// left (blue), the name on the left and the value on the right.
class AttributionBars : public QWidget {
    Q_OBJECT
public:
    explicit AttributionBars(QWidget* parent = nullptr);
    struct Bar {
        QString name;
        double value = 0;
    };
    void setBars(std::vector<Bar> bars, bool byMagnitude);
    void clear(const QString& message);
    int count() const { return int(bars_.size()); }
    const Bar& bar(int i) const { return bars_[size_t(i)]; }
    QRect barRect(int i) const;  // the row of bar i (for tests and clicks)
    QSize sizeHint() const override;

signals:
    void barClicked(const QString& name);
    void hoverChanged(const QString& text);

protected:
    void paintEvent(QPaintEvent*) override;
    void mouseMoveEvent(QMouseEvent*) override;
    void mousePressEvent(QMouseEvent*) override;

private:
    int rowHeight() const;
    int labelWidth() const;
    int rowAt(QPoint p) const;
    std::vector<Bar> bars_;
    double max_ = 1.0;
    QString message_;
};

}  // namespace strata::ui
