#pragma once
// The conversation drawn as a document: one framed block per message, the replies' text laid out token by token.
// Each piece of text is a link to the generated token(s) that released it, tinted in alternation so the token
// boundaries show; hovering shows what was kept about the step, clicking opens it in the explorer. Tokens stream
// in by appending to the last frame; structural changes (a new turn, edit, regenerate, clear) redraw it all.
#include <map>
#include <utility>
#include <vector>

#include <QTextBrowser>

#include "chat/chat_types.hpp"

namespace strata::ui {

class Conversation;
struct ChatEntry;

class ChatTranscript : public QTextBrowser {
    Q_OBJECT
public:
    explicit ChatTranscript(Conversation* conversation, QWidget* parent = nullptr);

    // Marks a generated token (its piece of text); (-1, -1) clears the mark.
    void setSelectedToken(int entry, int index);
    std::pair<int, int> selectedToken() const { return selected_; }
    // The (entry, token) under a point of the viewport, or (-1, -1).
    std::pair<int, int> tokenAt(const QPoint& viewportPos) const;
    // The document range [first, last) of a token's piece of text (tests; -1 when not drawn).
    std::pair<int, int> pieceRange(int entry, int index) const;
    // The plain text of the whole transcript as drawn.
    QString plainText() const { return toPlainText(); }
    // Token texts for the tooltips.
    void setVocabulary(const VocabularyPtr& vocab) { vocab_ = vocab; }

signals:
    void tokenClicked(int entry, int index);
    void tokenHovered(int entry, int index);  // (-1, -1) when the mouse leaves the tokens
    void editRequested(int entry);
    void regenerateRequested();

protected:
    bool viewportEvent(QEvent* e) override;

private:
    void rebuild();
    void appendEntry(int entry);
    void appendPiece(int entry, int index);
    void onAnchor(const QUrl& url);
    QString tokenTip(int entry, int index) const;
    QColor tint(int piece) const;
    void paintPiece(int entry, int start, bool selected);

    Conversation* conversation_;
    std::vector<class QTextFrame*> frames_;                // one per entry
    std::map<std::pair<int, int>, std::pair<int, int>> pieces_;  // (entry, first token) -> (position, length)
    std::map<std::pair<int, int>, int> pieceNumber_;       // (entry, first token) -> piece index within the reply
    std::pair<int, int> selected_{-1, -1};                 // (entry, first token of the piece)
    VocabularyPtr vocab_;
};

}  // namespace strata::ui
