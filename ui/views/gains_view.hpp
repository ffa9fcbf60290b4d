#pragma once
// RMSNorm gains: the learned gain vector of the selected norm over its features (outliers marked), and every norm
// of the model side by side (attention_norm and ffn_norm of each block, then the final norm) as min, median and
// max with outlier features marked. Click a norm to select it.
#include <cstdint>
#include <string>
#include <vector>

#include "views/view_page.hpp"

namespace strata::ui {

// One gain vector's summary.
struct GainStats {
    std::string name;     // "layers.3.ffn_norm"
    float min = 0, median = 0, max = 0;
    int64_t argmin = 0, argmax = 0;
    std::vector<int64_t> outliers;  // features far from the median (robust z > kOutlierZ), largest first, at most 8
    static constexpr double kOutlierZ = 6.0;
    static GainStats of(const std::string& name, const std::vector<float>& gain);
};

class VectorPlot;
class GainSummaryPlot;

class GainsView : public ViewPage {
    Q_OBJECT
public:
    GainsView(ExplorerState* state, EngineClient* client, QWidget* parent = nullptr);
    QString cardId() const override;
    TensorExport tensorExport() const override;
    bool hasContent() const override;
    // The gain shown on top: the selected part's norm, else this layer's attention_norm.
    QString selectedNorm() const;

signals:
    void partRequested(const QString& key, int layer);

private:
    void rebuild();
    void refresh();
    VectorPlot* vector_;
    GainSummaryPlot* summary_;
    std::vector<GainStats> stats_;
};

class GainSummaryPlot : public QWidget {
    Q_OBJECT
public:
    explicit GainSummaryPlot(QWidget* parent = nullptr);
    void setStats(const std::vector<GainStats>* stats);
    void setSelected(const QString& name);
    QSize sizeHint() const override { return {800, 260}; }
signals:
    void hoverChanged(const QString& text);
    void normClicked(const QString& name);
protected:
    void paintEvent(QPaintEvent*) override;
    void mouseMoveEvent(QMouseEvent*) override;
    void mousePressEvent(QMouseEvent*) override;
private:
    QRect plotRect() const;
    int columnAt(QPoint p) const;
    const std::vector<GainStats>* stats_ = nullptr;
    QString selected_;
    float lo_ = 0, hi_ = 1;
};

}  // namespace strata::ui
