#include "chat/chat_transcript.hpp"

#include <QHelpEvent>
#include <QScrollBar>
#include <QTextBlock>
#include <QTextCursor>
#include <QTextFrame>
#include <QToolTip>

#include "chat/conversation.hpp"

namespace strata::ui {

namespace {

const QColor kUserBackground(0xe8, 0xf0, 0xfd);
const QColor kReplyBackground(0xfb, 0xfb, 0xfc);
const QColor kBorder(0xd8, 0xdc, 0xe3);
const QColor kSelected(0xff, 0xd5, 0x4f);
const QColor kLink(0x1f, 0x5f, 0xa8);
const QColor kNote(0x6c, 0x75, 0x7d);

// "tok:E:I", "edit:E", "regen:E"
struct Anchor {
    QString kind;
    int entry = -1, index = -1;
};

Anchor parseAnchor(const QString& href) {
    Anchor a;
    const QStringList parts = href.split(QLatin1Char(':'));
    if (parts.size() < 2) return a;
    a.kind = parts[0];
    a.entry = parts[1].toInt();
    if (parts.size() > 2) a.index = parts[2].toInt();
    return a;
}

QString percent(double p) {
    if (p >= 0.001) return QStringLiteral("%1 %").arg(p * 100.0, 0, 'f', p >= 0.1 ? 1 : 2);
    return QStringLiteral("%1 %").arg(p * 100.0, 0, 'g', 2);
}

}  // namespace

ChatTranscript::ChatTranscript(Conversation* conversation, QWidget* parent)
    : QTextBrowser(parent), conversation_(conversation) {
    setOpenLinks(false);
    setOpenExternalLinks(false);
    document()->setDocumentMargin(8);
    setPlaceholderText(tr("The conversation appears here. Type a message below and press Ctrl+Enter."));
    connect(this, &QTextBrowser::anchorClicked, this, &ChatTranscript::onAnchor);
    connect(this, qOverload<const QUrl&>(&QTextBrowser::highlighted), this, [this](const QUrl& url) {
        const Anchor a = parseAnchor(url.toString());
        if (a.kind == QLatin1String("tok")) emit tokenHovered(a.entry, a.index);
        else emit tokenHovered(-1, -1);
    });
    connect(conversation_, &Conversation::reset, this, &ChatTranscript::rebuild);
    connect(conversation_, &Conversation::appended, this, [this](int entry) {
        appendEntry(entry);
        verticalScrollBar()->setValue(verticalScrollBar()->maximum());
    });
    connect(conversation_, &Conversation::tokenAppended, this, [this](int entry, int index) {
        if (conversation_->entry(entry).tokens[size_t(index)]->text.isEmpty()) return;  // a character still split
        QScrollBar* bar = verticalScrollBar();
        const bool atBottom = bar->value() >= bar->maximum() - 4;
        appendPiece(entry, index);
        if (atBottom) bar->setValue(bar->maximum());
    });
    connect(conversation_, &Conversation::entryFinished, this, [this] {
        rebuild();
        verticalScrollBar()->setValue(verticalScrollBar()->maximum());
    });
    rebuild();
}

QColor ChatTranscript::tint(int piece) const {
    // Two tints in alternation show where one token ends and the next begins: light ones under dark text, dark
    // ones under light text (a dark system palette).
    const bool dark = palette().color(QPalette::Base).lightness() < 128;
    if (dark) return piece % 2 == 0 ? QColor(0x1e, 0x33, 0x55) : QColor(0x44, 0x25, 0x4f);
    return piece % 2 == 0 ? QColor(0xdc, 0xe8, 0xfb) : QColor(0xf1, 0xe0, 0xf7);
}

void ChatTranscript::rebuild() {
    const int scroll = verticalScrollBar()->value();
    clear();
    frames_.clear();
    pieces_.clear();
    pieceNumber_.clear();
    for (int e = 0; e < conversation_->size(); ++e) appendEntry(e);
    if (selected_.first >= 0) paintPiece(selected_.first, selected_.second, true);
    verticalScrollBar()->setValue(scroll);
}

void ChatTranscript::appendEntry(int e) {
    const ChatEntry& entry = conversation_->entry(e);
    const bool completion = conversation_->mode() == ChatMode::Completion;
    QTextCursor c(document());
    c.movePosition(QTextCursor::End);
    QTextCharFormat plain;
    plain.setForeground(palette().color(QPalette::Text));

    if (completion && !frames_.empty()) {
        // One running document: every entry continues the same frame.
        frames_.push_back(frames_.back());
    } else {
        QTextFrameFormat ff;
        ff.setPadding(8);
        ff.setBorder(1);
        ff.setBorderStyle(QTextFrameFormat::BorderStyle_Solid);
        ff.setBorderBrush(kBorder);
        ff.setTopMargin(4);
        ff.setBottomMargin(6);
        const bool user = entry.role == QLatin1String("user") && !completion;
        ff.setBackground(user ? kUserBackground : kReplyBackground);
        if (user) ff.setLeftMargin(90);
        else if (!completion) ff.setRightMargin(60);
        QTextFrame* frame = c.insertFrame(ff);
        frames_.push_back(frame);
        // Header: who, what can be done, how the reply ended.
        QTextCharFormat bold = plain;
        bold.setFontWeight(QFont::Bold);
        QTextCharFormat link;
        link.setAnchor(true);
        link.setForeground(kLink);
        link.setFontUnderline(true);
        QTextCharFormat note = plain;
        note.setForeground(kNote);
        const QString who = completion ? tr("Document") : user ? tr("You") : tr("Assistant");
        c.insertText(who, bold);
        if (user) {
            c.insertText(QStringLiteral("   "), plain);
            link.setAnchorHref(QStringLiteral("edit:%1").arg(e));
            c.insertText(tr("edit"), link);
        }
        const int last = conversation_->lastReply();
        const ChatEntry* reply = completion && last >= 0 ? &conversation_->entry(last) : entry.isReply() ? &entry : nullptr;
        if (reply && !reply->streaming && !reply->note.isEmpty()) {
            QString info = QStringLiteral("   %1 tokens").arg(reply->tokens.size());
            if (reply->tokensPerSecond > 0) info += QStringLiteral(" \u00b7 %1 tokens/s").arg(reply->tokensPerSecond, 0, 'f', 1);
            info += QStringLiteral(" \u00b7 ") + reply->note;
            c.insertText(info, note);
        }
        if (last >= 0 && (completion || e == last) && !conversation_->streaming()) {
            c.insertText(QStringLiteral("   "), plain);
            link.setAnchorHref(QStringLiteral("regen:%1").arg(last));
            c.insertText(tr("regenerate"), link);
        }
        c.insertBlock();
    }
    QTextCursor body = frames_.back()->lastCursorPosition();
    if (!entry.isReply()) {
        body.insertText(entry.content, plain);
        return;
    }
    QString released;
    for (int i = 0; i < int(entry.tokens.size()); ++i) {
        released += entry.tokens[size_t(i)]->text;
        if (!entry.tokens[size_t(i)]->text.isEmpty()) appendPiece(e, i);
    }
    body = frames_.back()->lastCursorPosition();
    if (entry.content.size() > released.size() && entry.content.startsWith(released))
        body.insertText(entry.content.mid(released.size()), plain);  // the tail of an unfinished character
}

void ChatTranscript::appendPiece(int e, int index) {
    const ChatEntry& entry = conversation_->entry(e);
    const int start = Conversation::pieceStart(entry, index);
    QTextCursor c = frames_[size_t(e)]->lastCursorPosition();
    int number = 0;
    for (const auto& [key, n] : pieceNumber_)
        if (key.first == e) number = std::max(number, n + 1);
    QTextCharFormat f;
    f.setAnchor(true);
    f.setAnchorHref(QStringLiteral("tok:%1:%2").arg(e).arg(start));
    f.setForeground(palette().color(QPalette::Text));
    f.setBackground(tint(number));
    const int pos = c.position();
    c.insertText(entry.tokens[size_t(index)]->text, f);
    pieces_[{e, start}] = {pos, c.position() - pos};
    pieceNumber_[{e, start}] = number;
    if (selected_ == std::make_pair(e, start)) paintPiece(e, start, true);
}

void ChatTranscript::paintPiece(int e, int start, bool selected) {
    const auto it = pieces_.find({e, start});
    if (it == pieces_.end()) return;
    QTextCursor c(document());
    c.setPosition(it->second.first);
    c.setPosition(it->second.first + it->second.second, QTextCursor::KeepAnchor);
    QTextCharFormat f;
    f.setBackground(selected ? kSelected : tint(pieceNumber_[{e, start}]));
    c.mergeCharFormat(f);
}

void ChatTranscript::setSelectedToken(int entry, int index) {
    if (selected_.first >= 0) paintPiece(selected_.first, selected_.second, false);
    selected_ = {-1, -1};
    if (entry < 0 || entry >= conversation_->size()) return;
    const ChatEntry& e = conversation_->entry(entry);
    if (!e.isReply() || index < 0 || index >= int(e.tokens.size())) return;
    selected_ = {entry, Conversation::pieceStart(e, index)};
    paintPiece(selected_.first, selected_.second, true);
}

std::pair<int, int> ChatTranscript::tokenAt(const QPoint& viewportPos) const {
    const Anchor a = parseAnchor(anchorAt(viewportPos));
    if (a.kind != QLatin1String("tok")) return {-1, -1};
    return {a.entry, a.index};
}

std::pair<int, int> ChatTranscript::pieceRange(int entry, int index) const {
    if (entry < 0 || entry >= conversation_->size()) return {-1, -1};
    const ChatEntry& e = conversation_->entry(entry);
    if (index < 0 || index >= int(e.tokens.size())) return {-1, -1};
    const auto it = pieces_.find({entry, Conversation::pieceStart(e, index)});
    if (it == pieces_.end()) return {-1, -1};
    return {it->second.first, it->second.first + it->second.second};
}

void ChatTranscript::onAnchor(const QUrl& url) {
    const Anchor a = parseAnchor(url.toString());
    if (a.kind == QLatin1String("tok")) emit tokenClicked(a.entry, a.index);
    else if (a.kind == QLatin1String("edit")) emit editRequested(a.entry);
    else if (a.kind == QLatin1String("regen")) emit regenerateRequested();
}

QString ChatTranscript::tokenTip(int e, int index) const {
    if (e < 0 || e >= conversation_->size()) return {};
    const ChatEntry& entry = conversation_->entry(e);
    if (index < 0 || index >= int(entry.tokens.size())) return {};
    auto name = [this](int32_t id) { return vocab_ ? vocab_->displayOf(id) : QStringLiteral("#%1").arg(id); };
    QStringList lines;
    // The piece's tokens: usually one; more when a character was split across tokens.
    int end = index;
    while (end < int(entry.tokens.size()) - 1 && entry.tokens[size_t(end)]->text.isEmpty()) ++end;
    for (int i = index; i <= end; ++i) {
        const ChatToken& t = *entry.tokens[size_t(i)];
        lines << tr("<b>%1</b> \u00b7 id %2 \u00b7 position %3").arg(name(t.id).toHtmlEscaped()).arg(t.id).arg(t.position);
        lines << tr("p = %1 \u00b7 rank %2 \u00b7 entropy %3 nats").arg(percent(t.prob)).arg(t.rank + 1).arg(t.entropy, 0, 'f', 2);
    }
    const ChatToken& t = *entry.tokens[size_t(index)];
    QStringList top;
    for (size_t k = 0; k < std::min<size_t>(5, t.top.size()); ++k)
        top << QStringLiteral("%1 %2").arg(name(t.top[k].id).toHtmlEscaped(), percent(t.topProb[k]));
    if (!top.isEmpty()) lines << tr("most likely: %1").arg(top.join(QStringLiteral(", ")));
    lines << tr("<i>click to open this step in the explorer</i>");
    return lines.join(QStringLiteral("<br>"));
}

bool ChatTranscript::viewportEvent(QEvent* e) {
    if (e->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(e);
        const auto [entry, index] = tokenAt(help->pos());
        if (entry >= 0) QToolTip::showText(help->globalPos(), tokenTip(entry, index), viewport());
        else QToolTip::hideText();
        return true;
    }
    return QTextBrowser::viewportEvent(e);
}

}  // namespace strata::ui
