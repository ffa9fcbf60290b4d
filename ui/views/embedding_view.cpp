#include "views/embedding_view.hpp"

#include <QHeaderView>
#include <QLabel>
#include <QPainter>
#include <QSplitter>
#include <QStyledItemDelegate>
#include <QTableWidget>
#include <QVBoxLayout>

#include "explorer/engine_client.hpp"
#include "views/plot_util.hpp"
#include "views/vector_plot.hpp"

namespace strata::ui {

namespace {
// Draws a cosine in [-1, 1] as a bar from the cell's middle, with the number on top.
class CosineDelegate : public QStyledItemDelegate {
public:
    using QStyledItemDelegate::QStyledItemDelegate;
    void paint(QPainter* g, const QStyleOptionViewItem& opt, const QModelIndex& index) const override {
        const double v = index.data(Qt::UserRole).toDouble();
        const QRect r = opt.rect.adjusted(2, 3, -2, -3);
        const int mid = r.left() + r.width() / 2;
        const int w = int(std::abs(v) * r.width() / 2);
        g->fillRect(v >= 0 ? QRect(mid, r.top(), w, r.height()) : QRect(mid - w, r.top(), w, r.height()),
                    v >= 0 ? QColor(0xd6, 0x60, 0x4d, 150) : QColor(0x43, 0x93, 0xc3, 150));
        g->setPen(opt.palette.color(QPalette::Text));
        g->drawText(r, Qt::AlignCenter, QString::number(v, 'f', 4));
    }
};
}  // namespace

EmbeddingView::EmbeddingView(ExplorerState* state, EngineClient* client, QWidget* parent)
    : ViewPage(tr("Token embeddings"), state, client, parent) {
    setTabName(tr("Embeddings"));
    heading_ = new QLabel;
    controls()->addWidget(heading_, 1);
    row_ = new VectorPlot;
    row_->setReferenceLine(0.0f);
    table_ = new QTableWidget(0, 4);
    table_->setHorizontalHeaderLabels({tr("rank"), tr("token"), tr("id"), tr("cosine")});
    table_->verticalHeader()->hide();
    table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    table_->setSelectionMode(QAbstractItemView::NoSelection);
    table_->horizontalHeader()->setSectionResizeMode(1, QHeaderView::Stretch);
    table_->horizontalHeader()->setSectionResizeMode(3, QHeaderView::Fixed);
    table_->setColumnWidth(3, 220);
    table_->setItemDelegateForColumn(3, new CosineDelegate(table_));
    auto* split = new QSplitter(Qt::Vertical);
    split->addWidget(row_);
    split->addWidget(table_);
    split->setStretchFactor(0, 2);
    split->setStretchFactor(1, 3);
    setCanvas(split);
    setReadout(tr("The selected position's token: its row of tok_embeddings and its nearest tokens by cosine similarity."));

    connect(row_, &VectorPlot::hoverChanged, this, [this](const QString& s) {
        if (!s.isEmpty()) setReadout(s);
    });
    connect(state_, &ExplorerState::runChanged, this, &EmbeddingView::request);
    connect(state_, &ExplorerState::positionChanged, this, &EmbeddingView::request);
    connect(state_, &ExplorerState::modelChanged, this, [this] {
        result_.reset();
        row_->clear(tr("Run a prompt, then select a token."));
        table_->setRowCount(0);
    });
    connect(client_, &EngineClient::nearestFinished, this, [this](const NearestResultPtr& r) {
        if (r && r->id == pending_) show(r);
    });
}

void EmbeddingView::showEvent(QShowEvent* e) {
    ViewPage::showEvent(e);
    if (stale_) request();
}

void EmbeddingView::request() {
    // The search reads the whole embedding table: only for a view someone is looking at.
    stale_ = !isVisible();
    if (stale_) return;
    const RunResultPtr& run = state_->run();
    if (!run || run->tokens.empty()) {
        row_->clear(tr("Run a prompt, then select a token."));
        return;
    }
    const int pos = std::clamp(state_->position(), 0, int(run->tokens.size()) - 1);
    const int32_t token = run->tokens[size_t(pos)];
    if (result_ && result_->token == token) {
        heading_->setText(tr("position %1 \u00b7 token \u2018%2\u2019 (id %3)").arg(pos).arg(result_->tokenText).arg(token));
        return;
    }
    heading_->setText(tr("position %1 \u00b7 token id %2 \u00b7 searching %3 rows\u2026")
                          .arg(pos)
                          .arg(token)
                          .arg(groupDigits(uint64_t(state_->model()->config.vocab_size))));
    pending_ = client_->nearest(token, kNeighbours);
}

void EmbeddingView::show(const NearestResultPtr& r) {
    result_ = r;
    const int pos = state_->position();
    heading_->setText(tr("position %1 \u00b7 token \u2018%2\u2019 (id %3)").arg(pos).arg(r->tokenText).arg(r->token));
    row_->setVector(r->row, tr("feature"), tr("E[%1]").arg(r->token));
    table_->setRowCount(int(r->nearest.size()));
    for (int i = 0; i < int(r->nearest.size()); ++i) {
        const auto& [id, cos] = r->nearest[size_t(i)];
        auto* rank = new QTableWidgetItem(QString::number(i));
        auto* text = new QTableWidgetItem(r->vocabText.at(id));
        auto* idItem = new QTableWidgetItem(QString::number(id));
        auto* cosItem = new QTableWidgetItem;
        cosItem->setData(Qt::UserRole, double(cos));
        if (id == r->token) {
            QFont f = text->font();
            f.setBold(true);
            text->setFont(f);
        }
        table_->setItem(i, 0, rank);
        table_->setItem(i, 1, text);
        table_->setItem(i, 2, idItem);
        table_->setItem(i, 3, cosItem);
    }
    emit cardChanged();
}

ViewPage::TensorExport EmbeddingView::tensorExport() const {
    TensorExport e;
    if (!result_) return e;
    e.name = QStringLiteral("tok_embeddings_row_%1").arg(result_->token);
    e.data = result_->row;
    e.shape = {int64_t(result_->row.size())};
    return e;
}

}  // namespace strata::ui
