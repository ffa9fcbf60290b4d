#pragma once
// Simple syntax highlighting for the C++ and GLSL lines a card cites: keywords, types, comments, strings,
// numbers, the line-number gutter ("  120 | ") and the lines the card cites (marked "▶").
#include <QRegularExpression>
#include <QSyntaxHighlighter>
#include <QTextCharFormat>

namespace strata::ui {

class SourceHighlighter : public QSyntaxHighlighter {
    Q_OBJECT
public:
    explicit SourceHighlighter(QTextDocument* document);

protected:
    void highlightBlock(const QString& text) override;

private:
    struct Rule {
        QRegularExpression pattern;
        QTextCharFormat format;
    };
    std::vector<Rule> rules_;
    QTextCharFormat gutter_, cited_, comment_;
    QRegularExpression gutterPattern_;
};

}  // namespace strata::ui
