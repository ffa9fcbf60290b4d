#pragma once
// The two pictures of one position's distribution in the logits explorer:
//   DistributionBars  the most likely tokens as bars: the model's probability and, beside it, the probability after
//                     the sampling settings (tokens the settings remove are greyed and crossed out);
//   RankPlot          the whole vocabulary: probability by rank on log-log axes, the survivors of the settings
//                     shaded with their renormalised probabilities, the text's actual next token marked.
#include <QWidget>

#include "chat/chat_types.hpp"

namespace strata::ui {

class LogitsDistribution;

class DistributionBars : public QWidget {
    Q_OBJECT
public:
    explicit DistributionBars(QWidget* parent = nullptr);
    // The distribution must outlive the widget's use of it (call again after it changes).
    void setData(const LogitsDistribution* distribution, const VocabularyPtr& vocab, int rows, int32_t highlight);
    int rows() const { return rows_; }
    QSize sizeHint() const override { return {520, 420}; }

signals:
    void hoverText(const QString& text);

protected:
    void paintEvent(QPaintEvent*) override;
    void mouseMoveEvent(QMouseEvent*) override;

private:
    int rowHeight() const;
    int headerHeight() const;
    const LogitsDistribution* dist_ = nullptr;
    VocabularyPtr vocab_;
    int rows_ = 0;
    int32_t highlight_ = -1;
};

class RankPlot : public QWidget {
    Q_OBJECT
public:
    explicit RankPlot(QWidget* parent = nullptr);
    void setData(const LogitsDistribution* distribution, const VocabularyPtr& vocab, int32_t highlight);
    QSize sizeHint() const override { return {520, 320}; }

signals:
    void hoverText(const QString& text);

protected:
    void paintEvent(QPaintEvent*) override;
    void mouseMoveEvent(QMouseEvent*) override;

private:
    QRectF plotRect() const;
    QString summary() const;
    QString sampledSummary() const;
    int textHeight(const QString& text) const;  // wrapped to the width
    double xOf(double rank1) const;   // rank counted from 1
    double yOf(double p) const;
    const LogitsDistribution* dist_ = nullptr;
    VocabularyPtr vocab_;
    int32_t highlight_ = -1;
    double minLog_ = -12.0;           // log10 of the lowest probability drawn
};

}  // namespace strata::ui
