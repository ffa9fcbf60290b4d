#include "logits/token_table_model.hpp"

#include <QBrush>
#include <QFont>

#include "logits/distribution.hpp"

namespace strata::ui {

QString formatPercent(double p) {
    const double pc = p * 100.0;
    if (pc >= 10) return QStringLiteral("%1 %").arg(pc, 0, 'f', 1);
    if (pc >= 0.01) return QStringLiteral("%1 %").arg(pc, 0, 'f', 3);
    if (pc == 0) return QStringLiteral("0 %");
    return QStringLiteral("%1 %").arg(pc, 0, 'e', 1);
}

TokenTableModel::TokenTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void TokenTableModel::setRows(const LogitsDistribution* distribution, const VocabularyPtr& vocab, std::vector<int32_t> ids,
                              int32_t highlight) {
    beginResetModel();
    dist_ = distribution;
    vocab_ = vocab;
    ids_ = std::move(ids);
    if (!dist_ || dist_->empty()) ids_.clear();
    highlight_ = highlight;
    endResetModel();
}

void TokenTableModel::refresh() {
    if (!ids_.empty()) emit dataChanged(index(0, 0), index(rowCount() - 1, ColumnCount - 1));
}

int TokenTableModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(ids_.size()); }

int TokenTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant TokenTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (orientation != Qt::Horizontal) return {};
    if (role == Qt::DisplayRole) {
        switch (section) {
            case RankColumn: return tr("rank");
            case TokenColumn: return tr("token");
            case IdColumn: return tr("id");
            case LogitColumn: return tr("logit");
            case ProbColumn: return tr("probability");
            case CumulativeColumn: return tr("cumulative");
            case SampledColumn: return tr("after settings");
        }
    }
    if (role == Qt::ToolTipRole) {
        switch (section) {
            case RankColumn: return tr("1 = the most likely next token");
            case ProbColumn: return tr("softmax(logits): the model's own distribution");
            case CumulativeColumn: return tr("The probability of this token and every more likely one");
            case SampledColumn: return tr("The distribution the sampler draws from after temperature, top-k, top-p and "
                                          "min-p; \u2717 marks tokens the settings remove");
        }
    }
    return {};
}

QVariant TokenTableModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || !dist_ || index.row() >= int(ids_.size())) return {};
    const int32_t id = ids_[size_t(index.row())];
    const int64_t rank = dist_->rankOf(id);
    const bool survives = dist_->survives(id);
    if (role == Qt::UserRole) {
        switch (index.column()) {
            case RankColumn: return qlonglong(rank + 1);
            case TokenColumn: return vocab_ ? vocab_->displayOf(id) : QString::number(id);
            case IdColumn: return id;
            case LogitColumn: return double(dist_->logit(id));
            case ProbColumn: return dist_->prob(id);
            case CumulativeColumn: return dist_->cumulative(rank);
            case SampledColumn: return dist_->sampledProb(id);
        }
        return {};
    }
    if (role == Qt::DisplayRole) {
        switch (index.column()) {
            case RankColumn: return qlonglong(rank + 1);
            case TokenColumn: return vocab_ ? vocab_->displayOf(id) : QStringLiteral("#%1").arg(id);
            case IdColumn: return id;
            case LogitColumn: return QString::number(double(dist_->logit(id)), 'f', 3);
            case ProbColumn: return formatPercent(dist_->prob(id));
            case CumulativeColumn: return formatPercent(dist_->cumulative(rank));
            case SampledColumn: return survives ? formatPercent(dist_->sampledProb(id)) : QStringLiteral("\u2717");
        }
        return {};
    }
    if (role == Qt::TextAlignmentRole)
        return index.column() == TokenColumn ? QVariant(Qt::AlignLeft | Qt::AlignVCenter) : QVariant(Qt::AlignRight | Qt::AlignVCenter);
    if (role == Qt::ForegroundRole && !survives) return QBrush(QColor(0x9a, 0xa0, 0xa6));
    if (role == Qt::BackgroundRole && id == highlight_) return QBrush(QColor(0xff, 0xe0, 0x8a));
    if (role == Qt::FontRole && id == highlight_) {
        QFont f;
        f.setBold(true);
        return f;
    }
    if (role == Qt::ToolTipRole) {
        QString tip = tr("\u2018%1\u2019 id %2: rank %3, logit %4, p = %5")
                          .arg(vocab_ ? vocab_->displayOf(id) : QString::number(id))
                          .arg(id)
                          .arg(rank + 1)
                          .arg(double(dist_->logit(id)), 0, 'f', 4)
                          .arg(formatPercent(dist_->prob(id)));
        tip += survives ? tr("; after the settings %1").arg(formatPercent(dist_->sampledProb(id)))
                        : tr("; removed by the settings");
        if (id == highlight_) tip += tr(" \u00b7 the text's actual next token");
        return tip;
    }
    return {};
}

}  // namespace strata::ui
