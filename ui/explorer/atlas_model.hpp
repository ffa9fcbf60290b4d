#pragma once
// The atlas: the model as a tree of its parts, in model.py's vocabulary, after OpenModelAtlas's model page.
//   Transformer (totals, config)
//     tok_embeddings
//     layers.0 .. layers.{N-1}   (TransformerBlock)
//       attention_norm
//       attention: wq, wk, wv, RoPE, scores + softmax, wo, residual add
//       ffn_norm
//       feed_forward: w1, w3, SiLU and product, w2, residual add
//     norm
//     output
// Columns: part, shape, parameters (exact, from the checkpoint's tensor shapes).
#include <memory>
#include <vector>

#include <QAbstractItemModel>

#include "explorer/explorer_state.hpp"
#include "worker/worker_types.hpp"

namespace strata::ui {

class AtlasModel : public QAbstractItemModel {
    Q_OBJECT
public:
    enum Column { NameColumn, ShapeColumn, ParamsColumn, ColumnCount };
    enum Role {
        PartKeyRole = Qt::UserRole + 1,  // QString: Part::key
        LayerRole,                       // int: block index, -1 outside blocks
        TensorRole,                      // QString: the traced activation, {N} resolved
        WeightRole,                      // QString: the canonical weight, {N} resolved
        ParamsRole,                      // qulonglong: exact parameter count
    };

    explicit AtlasModel(QObject* parent = nullptr);
    ~AtlasModel() override;

    void setSummary(const ModelSummaryPtr& summary);
    const ModelSummaryPtr& summary() const { return summary_; }

    // The part behind an index (names keep {N}; layer() says which block).
    Part part(const QModelIndex& index) const;
    int layer(const QModelIndex& index) const;
    // The index of a part in a block (layer >= 0) or at the top level (layer -1), or invalid.
    QModelIndex find(const QString& key, int layer) const;
    uint64_t parameters(const QModelIndex& index) const;

    QModelIndex index(int row, int column, const QModelIndex& parent = {}) const override;
    QModelIndex parent(const QModelIndex& child) const override;
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
    Qt::ItemFlags flags(const QModelIndex& index) const override;

private:
    struct Node;
    Node* node(const QModelIndex& index) const;
    void build();

    ModelSummaryPtr summary_;
    std::unique_ptr<Node> root_;  // invisible root; its single child is the model
};

}  // namespace strata::ui
