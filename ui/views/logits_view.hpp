#pragma once
// Logits top-k at the selected position: the next-token candidates with their logits and probabilities
// (softmax over the whole vocabulary), the distribution's entropy, and where the prompt's actual next token
// ranks. (The chat issue deepens this into the full logits explorer in ui/logits/.)
#include "views/view_page.hpp"

class QLabel;

namespace strata::ui {

class TopKBars;

class LogitsView : public ViewPage {
    Q_OBJECT
public:
    LogitsView(ExplorerState* state, EngineClient* client, QWidget* parent = nullptr);
    QString cardId() const override { return QStringLiteral("logits"); }
    TensorExport tensorExport() const override;
    bool hasContent() const override;
    TopKBars* bars() const { return bars_; }

private:
    void refresh();
    TopKBars* bars_;
    QLabel* heading_;
};

struct TopKRow {
    int32_t id = 0;
    QString text;
    float logit = 0;
    double prob = 0;
    bool actualNext = false;  // the prompt's next token
};

class TopKBars : public QWidget {
    Q_OBJECT
public:
    explicit TopKBars(QWidget* parent = nullptr);
    void setRows(std::vector<TopKRow> rows, const QString& message = {});
    const std::vector<TopKRow>& rows() const { return rows_; }
    QSize sizeHint() const override { return {700, 460}; }
signals:
    void hoverChanged(const QString& text);
protected:
    void paintEvent(QPaintEvent*) override;
    void mouseMoveEvent(QMouseEvent*) override;
private:
    int rowHeight() const;
    std::vector<TopKRow> rows_;
    QString message_;
};

}  // namespace strata::ui
