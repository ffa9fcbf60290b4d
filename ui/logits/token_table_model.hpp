#pragma once
// Rows of tokens from one position's distribution: rank, token, id, logit, probability, cumulative probability
// (of every token up to that rank), and the probability after the sampling settings, survivors marked. The logits
// explorer shows the top k this way, and the tokens a search found. Qt::UserRole gives the raw numbers.
#include <vector>

#include <QAbstractTableModel>

#include "chat/chat_types.hpp"

namespace strata::ui {

class LogitsDistribution;

class TokenTableModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { RankColumn, TokenColumn, IdColumn, LogitColumn, ProbColumn, CumulativeColumn, SampledColumn, ColumnCount };

    explicit TokenTableModel(QObject* parent = nullptr);

    // The distribution must outlive the rows (call again after it changes). highlight: the token to mark (the
    // text's actual next token), -1 for none.
    void setRows(const LogitsDistribution* distribution, const VocabularyPtr& vocab, std::vector<int32_t> ids,
                 int32_t highlight);
    // The same ids, redrawn (after the sampling settings changed).
    void refresh();
    int32_t idAt(int row) const { return ids_[size_t(row)]; }
    const std::vector<int32_t>& ids() const { return ids_; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    const LogitsDistribution* dist_ = nullptr;
    VocabularyPtr vocab_;
    std::vector<int32_t> ids_;
    int32_t highlight_ = -1;
};

// A probability as a person reads it: "41.2 %", "0.031 %", "2.1e-07 %".
QString formatPercent(double p);

}  // namespace strata::ui
