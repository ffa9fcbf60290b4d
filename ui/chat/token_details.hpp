#pragma once
// What the chat kept about one generated token, drawn at once without the engine: the step's most likely tokens
// as bars (the chosen one marked) and the residual stream's norm after each block at that step.
#include <QWidget>

#include "chat/chat_types.hpp"

namespace strata::ui {

class TokenDetails : public QWidget {
    Q_OBJECT
public:
    explicit TokenDetails(QWidget* parent = nullptr);
    void setVocabulary(const VocabularyPtr& vocab);
    // Shows a token (nullptr: a hint instead).
    void setToken(const ChatTokenPtr& token);
    const ChatTokenPtr& token() const { return token_; }
    QSize sizeHint() const override { return {440, 420}; }
    QSize minimumSizeHint() const override { return {280, 260}; }

protected:
    void paintEvent(QPaintEvent*) override;

private:
    void paintTop(class QPainter& g, const QRect& r) const;
    void paintNorms(class QPainter& g, const QRect& r) const;
    QString name(int32_t id) const;

    VocabularyPtr vocab_;
    ChatTokenPtr token_;
};

}  // namespace strata::ui
