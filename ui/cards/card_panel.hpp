#pragma once
// The side panel beside every view: the annotation card (rich text) above, and below it the Strata source
// lines the card cites, taken from the copy embedded at build time and highlighted.
#include <QWidget>

#include "cards/card.hpp"

class QComboBox;
class QLabel;
class QPlainTextEdit;
class QTextBrowser;

namespace strata::ui {

class CardPanel : public QWidget {
    Q_OBJECT
public:
    explicit CardPanel(QWidget* parent = nullptr);

    // Shows card `id` rendered against the context (an unknown id shows a note instead).
    void showCard(const QString& id, const CardContext& context);
    QString cardId() const { return cardId_; }
    QString html() const;
    // The citation shown in the source view (index into the card's computed_by).
    void showSource(int index);
    QString sourceText() const;

private:
    QTextBrowser* browser_;
    QComboBox* sources_;
    QLabel* sourceStatus_;
    QPlainTextEdit* code_;
    QString cardId_;
    const Card* card_ = nullptr;
};

}  // namespace strata::ui
