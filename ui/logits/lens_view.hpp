#pragma once
// The logit lens at the selected position (a view of the explorer): what the model would predict if it stopped
// after each block, the residual h.N passed through the final norm and the output projection. A table of each
// layer's most likely tokens, and a followed token's rank and probability across the layers (the text's actual
// next token unless another is chosen: type it, or click a token in the table). Computed on the engine worker
// when asked, not during generation.
#include <vector>

#include <QAbstractTableModel>

#include "logits/distribution.hpp"
#include "logits/lens.hpp"
#include "views/view_page.hpp"

class QLabel;
class QLineEdit;
class QPushButton;
class QSplitter;
class QTableView;

namespace strata::ui {

class LensPlot;
class LogitsSource;

class LensTableModel : public QAbstractTableModel {
    Q_OBJECT
public:
    static constexpr int kTop = 5;
    enum Column { RowColumn, RankColumn, ProbColumn, FirstTopColumn, ColumnCount = FirstTopColumn + kTop };

    explicit LensTableModel(QObject* parent = nullptr);
    void setLens(std::vector<lens::RowSummary> rows, const VocabularyPtr& vocab);
    void setTrack(const QString& token, lens::TokenTrack track);
    const std::vector<lens::RowSummary>& rows() const { return rows_; }
    const lens::TokenTrack& track() const { return track_; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    std::vector<lens::RowSummary> rows_;
    VocabularyPtr vocab_;
    QString token_;
    lens::TokenTrack track_;
};

class LensView : public ViewPage {
    Q_OBJECT
public:
    LensView(ExplorerState* state, EngineClient* client, LogitsSource* source, QWidget* parent = nullptr);

    QString cardId() const override { return QStringLiteral("logits"); }
    TensorExport tensorExport() const override;
    bool hasContent() const override;

    void compute();                  // asks the worker for the lens at the selected position
    void follow(int32_t id);         // the token the plot and the last columns follow
    void follow(const QString& query);
    int32_t followed() const { return followed_; }
    LensTableModel* model() const { return model_; }
    LensPlot* plot() const { return plot_; }

protected:
    void showEvent(QShowEvent*) override;
    void hideEvent(QHideEvent*) override;

private:
    void onLens();
    void updateStatus();

    LogitsSource* source_;
    LensTableModel* model_;
    QTableView* table_;
    LensPlot* plot_;
    QSplitter* split_;
    QPushButton* compute_;
    QLineEdit* token_;
    QLabel* status_;
    LogitsDistribution final_;  // the last row: the model's own logits, for finding tokens
    qint64 shownId_ = -1;
    int32_t followed_ = -1;
};

}  // namespace strata::ui
