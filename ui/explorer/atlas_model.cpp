#include "explorer/atlas_model.hpp"

#include <functional>

#include "views/plot_util.hpp"

namespace strata::ui {

struct AtlasModel::Node {
    Part part;
    int layer = -1;
    QString shape;        // display text
    QString tooltip;
    uint64_t params = 0;  // exact; for groups the sum of their children
    Node* parent = nullptr;
    std::vector<std::unique_ptr<Node>> children;

    Node* add(std::unique_ptr<Node> child) {
        child->parent = this;
        children.push_back(std::move(child));
        return children.back().get();
    }
    int row() const {
        if (!parent) return 0;
        for (size_t i = 0; i < parent->children.size(); ++i)
            if (parent->children[i].get() == this) return int(i);
        return 0;
    }
};

namespace {

QString shapeText(const std::vector<int64_t>& shape) {
    QStringList parts;
    for (int64_t d : shape) parts << groupDigits(uint64_t(d));
    return "[" + parts.join(", ") + "]";
}

QString withLayer(QString pattern, int layer) { return pattern.replace(QStringLiteral("{N}"), QString::number(layer)); }

}  // namespace

AtlasModel::AtlasModel(QObject* parent) : QAbstractItemModel(parent), root_(std::make_unique<Node>()) {}

AtlasModel::~AtlasModel() = default;

void AtlasModel::setSummary(const ModelSummaryPtr& summary) {
    beginResetModel();
    summary_ = summary;
    build();
    endResetModel();
}

void AtlasModel::build() {
    root_ = std::make_unique<Node>();
    if (!summary_) return;
    const ModelConfig& c = summary_->config;
    const QString dim = groupDigits(uint64_t(c.dim));

    auto weightNode = [&](const QString& key, const QString& label, const QString& weight, const QString& tensor,
                          const QString& weightCard, const QString& tensorCard, int layer, const QString& tip) {
        auto n = std::make_unique<Node>();
        n->part = Part{key, label, tensor, weight, tensorCard, weightCard, layer >= 0};
        n->layer = layer;
        n->tooltip = tip;
        const auto it = summary_->weights.find(withLayer(weight, layer).toStdString());
        if (it != summary_->weights.end()) {
            n->params = it->second.numel();
            n->shape = shapeText(it->second.shape) + " " + it->second.dtype;
        }
        return n;
    };
    auto opNode = [&](const QString& key, const QString& label, const QString& tensor, const QString& card,
                      const QString& shape, int layer, const QString& tip) {
        auto n = std::make_unique<Node>();
        n->part = Part{key, label, tensor, QString(), card, QString(), layer >= 0};
        n->layer = layer;
        n->shape = shape;
        n->tooltip = tip;
        return n;
    };
    auto sumChildren = [](Node* n) {
        for (const auto& ch : n->children) n->params += ch->params;
    };

    auto model = std::make_unique<Node>();
    model->part = Part{QStringLiteral("model"), QStringLiteral("Transformer"), QStringLiteral("logits"), QString(),
                       QStringLiteral("logits"), QString(), false};
    model->shape = tr("dim %1 \u00b7 %2 layers \u00b7 %3 heads (%4 kv) \u00b7 hidden %5 \u00b7 vocab %6")
                       .arg(dim)
                       .arg(c.n_layers)
                       .arg(c.n_heads)
                       .arg(c.n_kv_heads)
                       .arg(groupDigits(uint64_t(c.hidden_dim)))
                       .arg(groupDigits(uint64_t(c.vocab_size)));
    model->tooltip = tr("%1 (%2, %3)\nhead_dim %4, norm_eps %5, rope_theta %6%7%8")
                         .arg(summary_->name, summary_->format, summary_->dtype)
                         .arg(c.head_dim)
                         .arg(double(c.norm_eps))
                         .arg(double(c.rope_theta))
                         .arg(c.rope_scaling.enabled ? tr(", Llama 3.1 scaled RoPE (factor %1)").arg(double(c.rope_scaling.factor)) : QString())
                         .arg(c.tie_embeddings ? tr(", tied embeddings") : QString());
    Node* m = root_->add(std::move(model));

    m->add(weightNode(QStringLiteral("tok_embeddings"), QStringLiteral("tok_embeddings"), QStringLiteral("tok_embeddings"),
                      QStringLiteral("x0"), QStringLiteral("w_tok_embeddings"), QStringLiteral("x0"), -1,
                      tr("Token embedding table: one row of %1 features per vocabulary entry; its rows for the prompt are x\u2080").arg(dim)));

    const QString tdim = QStringLiteral("[T, %1]").arg(dim);
    for (int i = 0; i < int(c.n_layers); ++i) {
        auto block = std::make_unique<Node>();
        block->part = Part{QStringLiteral("block"), QStringLiteral("layers.%1").arg(i), QStringLiteral("h.{N}"), QString(),
                           QStringLiteral("h"), QString(), true};
        block->layer = i;
        block->shape = tdim;
        block->tooltip = tr("TransformerBlock: h = x + attention(attention_norm(x)); out = h + feed_forward(ffn_norm(h))");
        Node* b = m->add(std::move(block));

        b->add(weightNode(QStringLiteral("block/attention_norm"), QStringLiteral("attention_norm"),
                          QStringLiteral("layers.{N}.attention_norm"), QStringLiteral("layers.{N}.attention_norm"),
                          QStringLiteral("w_attention_norm"), QStringLiteral("attention_norm"), i,
                          tr("RMSNorm before attention (learned gain)")));

        auto att = std::make_unique<Node>();
        att->part = Part{QStringLiteral("block/attention"), QStringLiteral("attention"), QStringLiteral("layers.{N}.attention_out"),
                         QString(), QStringLiteral("attention_out"), QString(), true};
        att->layer = i;
        att->shape = tdim;
        att->tooltip = tr("Attention, grouped-query: %1 query heads share %2 key/value heads").arg(c.n_heads).arg(c.n_kv_heads);
        Node* a = b->add(std::move(att));
        a->add(weightNode(QStringLiteral("block/attention/wq"), QStringLiteral("wq"), QStringLiteral("layers.{N}.attention.wq"),
                          QStringLiteral("layers.{N}.q"), QStringLiteral("w_wq"), QStringLiteral("q"), i, tr("Query projection")));
        a->add(weightNode(QStringLiteral("block/attention/wk"), QStringLiteral("wk"), QStringLiteral("layers.{N}.attention.wk"),
                          QStringLiteral("layers.{N}.k"), QStringLiteral("w_wk"), QStringLiteral("k"), i, tr("Key projection")));
        a->add(weightNode(QStringLiteral("block/attention/wv"), QStringLiteral("wv"), QStringLiteral("layers.{N}.attention.wv"),
                          QStringLiteral("layers.{N}.v"), QStringLiteral("w_wv"), QStringLiteral("v"), i, tr("Value projection")));
        a->add(opNode(QStringLiteral("block/attention/rope"), QStringLiteral("RoPE"), QStringLiteral("layers.{N}.q"),
                      QStringLiteral("rope"), QStringLiteral("[T, %1] (q), [T, %2] (k)").arg(c.q_dim()).arg(c.kv_dim()), i,
                      tr("Rotary position embedding of q and k (freqs_cis); no parameters")));
        a->add(opNode(QStringLiteral("block/attention/softmax"), QStringLiteral("scores + softmax"),
                      QStringLiteral("layers.{N}.attention.probs"), QStringLiteral("attention_probs"),
                      QStringLiteral("[%1 heads, T, T]").arg(c.n_heads), i,
                      tr("softmax(q k\u1d40 / \u221ahead_dim + causal mask), per head; no parameters")));
        a->add(opNode(QStringLiteral("block/attention/heads"), QStringLiteral("heads"), QStringLiteral("layers.{N}.attention.heads"),
                      QStringLiteral("attention_heads"), QStringLiteral("[T, %1 heads \u00d7 %2]").arg(c.n_heads).arg(c.head_dim), i,
                      tr("Every head's weighted values, softmax(scores) @ v, concatenated before wo; the columns a head "
                         "ablation zeroes (right-click a column to ablate its head); no parameters")));
        a->add(weightNode(QStringLiteral("block/attention/wo"), QStringLiteral("wo"), QStringLiteral("layers.{N}.attention.wo"),
                          QStringLiteral("layers.{N}.attention_out"), QStringLiteral("w_wo"), QStringLiteral("attention_out"), i,
                          tr("Output projection of the concatenated heads")));
        a->add(opNode(QStringLiteral("block/attention/residual"), QStringLiteral("residual add"), QStringLiteral("layers.{N}.h"),
                      QStringLiteral("h_mid"), tdim, i, tr("h = x + attention(attention_norm(x))")));
        sumChildren(a);

        b->add(weightNode(QStringLiteral("block/ffn_norm"), QStringLiteral("ffn_norm"), QStringLiteral("layers.{N}.ffn_norm"),
                          QStringLiteral("layers.{N}.ffn_norm"), QStringLiteral("w_ffn_norm"), QStringLiteral("ffn_norm"), i,
                          tr("RMSNorm before the feed-forward (learned gain)")));

        auto ffn = std::make_unique<Node>();
        ffn->part = Part{QStringLiteral("block/feed_forward"), QStringLiteral("feed_forward"), QStringLiteral("layers.{N}.ffn_out"),
                         QString(), QStringLiteral("ffn_out"), QString(), true};
        ffn->layer = i;
        ffn->shape = tdim;
        ffn->tooltip = tr("FeedForward, SwiGLU: w2(silu(w1 x) * w3 x), hidden size %1").arg(c.hidden_dim);
        Node* f = b->add(std::move(ffn));
        f->add(weightNode(QStringLiteral("block/feed_forward/w1"), QStringLiteral("w1"), QStringLiteral("layers.{N}.feed_forward.w1"),
                          QString(), QStringLiteral("w_w1"), QString(), i, tr("Gate projection (through SiLU)")));
        f->add(weightNode(QStringLiteral("block/feed_forward/w3"), QStringLiteral("w3"), QStringLiteral("layers.{N}.feed_forward.w3"),
                          QString(), QStringLiteral("w_w3"), QString(), i, tr("Up projection")));
        f->add(opNode(QStringLiteral("block/feed_forward/swiglu"), QStringLiteral("SiLU and product"),
                      QStringLiteral("layers.{N}.ffn_hidden"), QStringLiteral("ffn_hidden"),
                      QStringLiteral("[T, %1]").arg(groupDigits(uint64_t(c.hidden_dim))), i, tr("silu(w1 x) * (w3 x); no parameters")));
        f->add(weightNode(QStringLiteral("block/feed_forward/w2"), QStringLiteral("w2"), QStringLiteral("layers.{N}.feed_forward.w2"),
                          QStringLiteral("layers.{N}.ffn_out"), QStringLiteral("w_w2"), QStringLiteral("ffn_out"), i, tr("Down projection")));
        f->add(opNode(QStringLiteral("block/feed_forward/residual"), QStringLiteral("residual add"), QStringLiteral("h.{N}"),
                      QStringLiteral("h"), tdim, i, tr("out = h + feed_forward(ffn_norm(h))")));
        sumChildren(f);
        sumChildren(b);
    }

    m->add(weightNode(QStringLiteral("norm"), QStringLiteral("norm"), QStringLiteral("norm"), QStringLiteral("norm"),
                      QStringLiteral("w_norm"), QStringLiteral("norm"), -1, tr("Final RMSNorm (learned gain)")));
    Node* out = m->add(weightNode(QStringLiteral("output"), QStringLiteral("output"),
                                  c.tie_embeddings ? QStringLiteral("tok_embeddings") : QStringLiteral("output"),
                                  QStringLiteral("logits"), QStringLiteral("w_output"), QStringLiteral("logits"), -1,
                                  tr("Vocabulary projection: logits = output(norm(h))")));
    if (c.tie_embeddings) {
        // Tied (Llama 3.2): the projection reuses tok_embeddings, so it owns no parameters of its own.
        out->params = 0;
        out->shape += tr(" (tied to tok_embeddings)");
    }
    sumChildren(m);
}

AtlasModel::Node* AtlasModel::node(const QModelIndex& index) const {
    return index.isValid() ? static_cast<Node*>(index.internalPointer()) : root_.get();
}

Part AtlasModel::part(const QModelIndex& index) const { return index.isValid() ? node(index)->part : Part{}; }

int AtlasModel::layer(const QModelIndex& index) const { return index.isValid() ? node(index)->layer : -1; }

uint64_t AtlasModel::parameters(const QModelIndex& index) const { return node(index)->params; }

QModelIndex AtlasModel::find(const QString& key, int layer) const {
    std::function<QModelIndex(const QModelIndex&)> walk = [&](const QModelIndex& parent) -> QModelIndex {
        for (int r = 0; r < rowCount(parent); ++r) {
            const QModelIndex i = index(r, 0, parent);
            const Node* n = node(i);
            if (n->part.key == key && (layer < 0 || n->layer == layer)) return i;
            // Only descend into the wanted block.
            if (n->part.key == QLatin1String("block") && layer >= 0 && n->layer != layer) continue;
            const QModelIndex found = walk(i);
            if (found.isValid()) return found;
        }
        return {};
    };
    return walk({});
}

QModelIndex AtlasModel::index(int row, int column, const QModelIndex& parent) const {
    if (!hasIndex(row, column, parent)) return {};
    const Node* p = node(parent);
    if (row < 0 || row >= int(p->children.size())) return {};
    return createIndex(row, column, p->children[size_t(row)].get());
}

QModelIndex AtlasModel::parent(const QModelIndex& child) const {
    if (!child.isValid()) return {};
    const Node* p = node(child)->parent;
    if (!p || p == root_.get()) return {};
    return createIndex(p->row(), 0, const_cast<Node*>(p));
}

int AtlasModel::rowCount(const QModelIndex& parent) const {
    if (parent.isValid() && parent.column() != 0) return 0;
    return int(node(parent)->children.size());
}

int AtlasModel::columnCount(const QModelIndex&) const { return ColumnCount; }

QVariant AtlasModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid()) return {};
    const Node* n = node(index);
    switch (role) {
        case Qt::DisplayRole:
            switch (index.column()) {
                case NameColumn: return n->part.label;
                case ShapeColumn: return n->shape;
                case ParamsColumn: return n->params ? groupDigits(n->params) : QStringLiteral("\u2013");
            }
            return {};
        case Qt::ToolTipRole: return n->tooltip;
        case Qt::TextAlignmentRole:
            return index.column() == ParamsColumn ? QVariant(Qt::AlignRight | Qt::AlignVCenter) : QVariant();
        case PartKeyRole: return n->part.key;
        case LayerRole: return n->layer;
        case TensorRole: return withLayer(n->part.tensor, n->layer);
        case WeightRole: return withLayer(n->part.weight, n->layer);
        case ParamsRole: return QVariant::fromValue<qulonglong>(n->params);
    }
    return {};
}

QVariant AtlasModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
    switch (section) {
        case NameColumn: return tr("part");
        case ShapeColumn: return tr("shape");
        case ParamsColumn: return tr("parameters");
    }
    return {};
}

Qt::ItemFlags AtlasModel::flags(const QModelIndex& index) const {
    return index.isValid() ? Qt::ItemIsEnabled | Qt::ItemIsSelectable : Qt::NoItemFlags;
}

}  // namespace strata::ui
