#pragma once
// The logits explorer (a view of the explorer): the next-token distribution at the selected position in full.
// The top-k table (token, id, logit, probability, cumulative probability, after the settings) and its bar chart;
// the whole distribution by rank on log-log axes with entropy and perplexity; live temperature / top-k / top-p /
// min-p controls that redraw the distribution the sampler would draw from and mark the surviving tokens; and a
// search for any token by text or id (its logit, probability and rank).
#include <memory>

#include "logits/distribution.hpp"
#include "views/view_page.hpp"

class QLabel;
class QLineEdit;
class QSpinBox;
class QTableView;

namespace strata::ui {

class DistributionBars;
class LogitsSource;
class RankPlot;
class SamplingControls;
class TokenTableModel;

class LogitsExplorer : public ViewPage {
    Q_OBJECT
public:
    LogitsExplorer(ExplorerState* state, EngineClient* client, LogitsSource* source, QWidget* parent = nullptr);

    QString cardId() const override { return QStringLiteral("logits"); }
    TensorExport tensorExport() const override;
    bool hasContent() const override;

    // Sets the live controls (the chat opens a token with the settings its reply was sampled with).
    void setSampling(const SamplerSettings& s);
    void setRows(int rows);
    void find(const QString& query);  // fills the search box and lists the matching tokens

    const LogitsDistribution& distribution() const { return dist_; }
    TokenTableModel* topModel() const { return topModel_; }
    TokenTableModel* foundModel() const { return foundModel_; }
    SamplingControls* sampling() const { return sampling_; }
    DistributionBars* bars() const { return bars_; }
    RankPlot* rankPlot() const { return plot_; }
    QString heading() const;

protected:
    void showEvent(QShowEvent*) override;
    void hideEvent(QHideEvent*) override;

private:
    void onLogits();
    void redraw();
    void updateHeading();

    LogitsSource* source_;
    LogitsDistribution dist_;
    qint64 shownId_ = -1;  // the PositionLogits shown
    SamplingControls* sampling_;
    QSpinBox* rows_;
    QLabel* heading_;
    TokenTableModel* topModel_;
    TokenTableModel* foundModel_;
    QTableView* topTable_;
    QTableView* foundTable_;
    QLineEdit* search_;
    QLabel* searchNote_;
    DistributionBars* bars_;
    RankPlot* plot_;
};

}  // namespace strata::ui
