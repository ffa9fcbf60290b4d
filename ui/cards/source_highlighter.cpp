#include "cards/source_highlighter.hpp"

#include <QGuiApplication>
#include <QPalette>

namespace strata::ui {

namespace {
// The colours below are chosen for a light background; on a dark palette they are lightened to stay readable.
QColor onBase(const QColor& c) {
    const bool dark = QGuiApplication::palette().color(QPalette::Base).lightness() < 128;
    return dark ? c.lighter(190) : c;
}
}  // namespace

SourceHighlighter::SourceHighlighter(QTextDocument* document) : QSyntaxHighlighter(document) {
    QTextCharFormat keyword;
    keyword.setForeground(onBase(QColor(0x1f, 0x4e, 0xa8)));
    keyword.setFontWeight(QFont::Bold);
    const QString keywords = QStringLiteral(
        "\\b(?:for|if|else|return|const|constexpr|auto|void|struct|class|namespace|using|static|template|typename|"
        "while|break|continue|switch|case|default|layout|uniform|buffer|shared|in|out|inout|readonly|writeonly|"
        "true|false|nullptr|throw|try|catch|operator|this|public|private|override|virtual)\\b");
    rules_.push_back({QRegularExpression(keywords), keyword});

    QTextCharFormat type;
    type.setForeground(onBase(QColor(0x0b, 0x7a, 0x75)));
    rules_.push_back({QRegularExpression(QStringLiteral(
                          "\\b(?:int|int32_t|int64_t|uint|uint32_t|uint64_t|size_t|float|double|bool|char|vec[234]|"
                          "uvec[234]|ivec[234]|mat[234]|float16_t|std::\\w+|Buf|TensorView|Trace|TracedTensor)\\b")),
                      type});

    QTextCharFormat number;
    number.setForeground(onBase(QColor(0x9c, 0x5d, 0x00)));
    rules_.push_back({QRegularExpression(QStringLiteral("\\b[0-9]+(?:\\.[0-9]*)?(?:e[-+]?[0-9]+)?[fuFU]?\\b")), number});

    QTextCharFormat preprocessor;
    preprocessor.setForeground(onBase(QColor(0x80, 0x40, 0x80)));
    rules_.push_back({QRegularExpression(QStringLiteral("#\\s*(?:include|define|extension|version|pragma|if|ifdef|endif|else)\\b.*")), preprocessor});

    QTextCharFormat string;
    string.setForeground(onBase(QColor(0xa3, 0x15, 0x15)));
    rules_.push_back({QRegularExpression(QStringLiteral("\"(?:[^\"\\\\]|\\\\.)*\"")), string});

    comment_.setForeground(onBase(QColor(0x6a, 0x73, 0x7d)));
    comment_.setFontItalic(true);
    rules_.push_back({QRegularExpression(QStringLiteral("//.*$")), comment_});

    gutter_.setForeground(onBase(QColor(0x99, 0x99, 0x99)));
    cited_.setForeground(onBase(QColor(0xc0, 0x39, 0x2b)));
    cited_.setFontWeight(QFont::Bold);
    gutterPattern_ = QRegularExpression(QStringLiteral("^([\u25b6 ])\\s*[0-9]+ \u2502 "));
}

void SourceHighlighter::highlightBlock(const QString& text) {
    for (const Rule& r : rules_)
        for (auto it = r.pattern.globalMatch(text); it.hasNext();) {
            const QRegularExpressionMatch m = it.next();
            setFormat(int(m.capturedStart()), int(m.capturedLength()), r.format);
        }
    // Block comments spanning lines: state 1 = inside /* ... */.
    int start = previousBlockState() == 1 ? 0 : int(text.indexOf(QStringLiteral("/*")));
    while (start >= 0) {
        const int end = int(text.indexOf(QStringLiteral("*/"), start));
        const int len = end < 0 ? int(text.size()) - start : end - start + 2;
        setFormat(start, len, comment_);
        setCurrentBlockState(end < 0 ? 1 : 0);
        if (end < 0) break;
        start = int(text.indexOf(QStringLiteral("/*"), end + 2));
    }
    if (const QRegularExpressionMatch m = gutterPattern_.match(text); m.hasMatch())
        setFormat(0, int(m.capturedLength()), m.captured(1) == QStringLiteral("\u25b6") ? cited_ : gutter_);
}

}  // namespace strata::ui
