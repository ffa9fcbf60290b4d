#pragma once
// Token embeddings: the selected position's token, its row of tok_embeddings over the features, and the tokens
// whose rows are nearest to it by cosine similarity over the whole vocabulary (computed on the worker).
#include "views/view_page.hpp"

class QTableWidget;
class QLabel;

namespace strata::ui {

class VectorPlot;

class EmbeddingView : public ViewPage {
    Q_OBJECT
public:
    EmbeddingView(ExplorerState* state, EngineClient* client, QWidget* parent = nullptr);
    QString cardId() const override { return QStringLiteral("w_tok_embeddings"); }
    TensorExport tensorExport() const override;
    bool hasContent() const override { return result_ != nullptr; }
    static constexpr int kNeighbours = 24;
    QTableWidget* table() const { return table_; }

protected:
    void showEvent(QShowEvent* e) override;

private:
    void request();
    void show(const NearestResultPtr& r);
    VectorPlot* row_;
    QTableWidget* table_;
    QLabel* heading_;
    qint64 pending_ = 0;
    bool stale_ = true;  // the selection changed while the view was hidden
    NearestResultPtr result_;
};

}  // namespace strata::ui
