// Streaming text in the chat window: a character split across tokens (an emoji is three byte-level tokens in
// Llama 3) appears once, whole, when its last byte arrives; every token of it opens the same piece of text; a reply
// cut inside a character ends with one U+FFFD. Tokens come as the worker sends them, through the conversation
// into the transcript.
#include <QSignalSpy>
#include <QTextDocument>

#include "catch.hpp"
#include "chat/chat_transcript.hpp"
#include "chat/conversation.hpp"
#include "strata/tokenizer.hpp"
#include "ui_support.hpp"

using namespace strata;
using namespace strata::ui;

namespace {

const Tokenizer& tokenizer() {
    static Tokenizer t = Tokenizer::from_hf_json(test::tokenizer_json());
    return t;
}

// The tokens of `text` as the worker streams them: each with the complete UTF-8 it releases.
std::vector<ChatTokenPtr> streamed(const std::vector<int32_t>& ids, int64_t pos0, StreamDecoder& decoder) {
    std::vector<ChatTokenPtr> out;
    for (size_t i = 0; i < ids.size(); ++i) {
        auto t = std::make_shared<ChatToken>();
        t->id = ids[i];
        t->index = int(i);
        t->position = pos0 + int64_t(i);
        t->text = QString::fromStdString(decoder.push(ids[i]));
        out.push_back(t);
    }
    return out;
}

}  // namespace

TEST_CASE("an emoji split across tokens appears once, whole, and each of its tokens opens it", "[chat]") {
    test::ui_app();
    const QString llama = QString::fromUtf8("\xF0\x9F\xA6\x99");  // U+1F999
    const std::vector<int32_t> ids = tokenizer().encode("A \xF0\x9F\xA6\x99 ok");
    REQUIRE(tokenizer().encode("\xF0\x9F\xA6\x99").size() >= 2);  // the point of the test: no token holds it whole

    Conversation c;
    ChatTranscript transcript(&c);
    c.addUser(QStringLiteral("Show me a llama."));
    const int reply = c.beginReply(SamplerSettings{}, 0);
    c.setReplyPrompt({128000, 1, 2}, 0);
    StreamDecoder decoder(tokenizer());
    const std::vector<ChatTokenPtr> tokens = streamed(ids, 3, decoder);
    // Follow the stream: until the emoji's last byte arrives, nothing of it shows.
    int completes = -1;  // the token that completes the emoji
    for (size_t i = 0; i < tokens.size(); ++i) {
        c.appendToken(tokens[i]);
        const QString shown = transcript.plainText();
        CHECK_FALSE(shown.contains(QChar(0xFFFD)));
        if (tokens[i]->text.contains(llama)) completes = int(i);
        CHECK(shown.count(llama) == (completes >= 0 ? 1 : 0));
        CHECK(shown.count(QChar(0xD83E)) == (completes >= 0 ? 1 : 0));  // never half a surrogate pair
    }
    REQUIRE(completes > 0);
    const int emojiFirst = Conversation::pieceStart(c.entry(reply), completes);
    CHECK(emojiFirst < completes);  // tokens before it released nothing
    for (int i = emojiFirst; i < completes; ++i) CHECK(tokens[size_t(i)]->text.isEmpty());
    c.finishReply(ChatOutcome{}, QStringLiteral("ended its turn"));
    const QString shown = transcript.plainText();
    CHECK(shown.count(llama) == 1);
    CHECK(c.entry(reply).content == QStringLiteral("A ") + llama + QStringLiteral(" ok"));
    // The tokens that made the emoji are one piece: each of them maps to the same range of text, the emoji.
    for (int i = emojiFirst; i <= completes; ++i) CHECK(transcript.pieceRange(reply, i) == transcript.pieceRange(reply, completes));
    const auto [from, to] = transcript.pieceRange(reply, completes);
    REQUIRE(from >= 0);
    QTextCursor cursor(transcript.document());
    cursor.setPosition(from);
    cursor.setPosition(to, QTextCursor::KeepAnchor);
    CHECK(cursor.selectedText() == tokens[size_t(completes)]->text);
    CHECK(cursor.selectedText().contains(llama));
    // Selecting a token marks its piece.
    transcript.setSelectedToken(reply, completes);
    CHECK(transcript.selectedToken() == std::make_pair(reply, emojiFirst));
}

TEST_CASE("a reply cut inside a character ends with one replacement character", "[chat]") {
    test::ui_app();
    const std::vector<int32_t> emoji = tokenizer().encode("\xF0\x9F\xA6\x99");
    REQUIRE(emoji.size() >= 2);
    Conversation c;
    ChatTranscript transcript(&c);
    c.addUser(QStringLiteral("Hi"));
    const int reply = c.beginReply(SamplerSettings{}, 0);
    StreamDecoder decoder(tokenizer());
    const std::vector<ChatTokenPtr> tokens = streamed({emoji.begin(), emoji.end() - 1}, 5, decoder);
    for (const ChatTokenPtr& t : tokens) c.appendToken(t);
    ChatOutcome o;
    o.stop = StopReason::Cancelled;
    o.tail = QString::fromStdString(decoder.flush());
    c.finishReply(o, QStringLiteral("stopped"));
    CHECK(c.entry(reply).content == QString(QChar(0xFFFD)));
    CHECK(transcript.plainText().count(QChar(0xFFFD)) == 1);
}

TEST_CASE("the transcript redraws a conversation: person's messages, replies with their notes, links", "[chat]") {
    test::ui_app();
    Conversation c;
    ChatTranscript transcript(&c);
    QSignalSpy clicked(&transcript, &ChatTranscript::tokenClicked);
    c.addUser(QStringLiteral("First question"));
    c.beginReply(SamplerSettings{}, 0);
    StreamDecoder decoder(tokenizer());
    for (const ChatTokenPtr& t : streamed(tokenizer().encode("First answer."), 10, decoder)) c.appendToken(t);
    ChatOutcome o;
    o.tokensPerSecond = 12.5;
    c.finishReply(o, QStringLiteral("ended its turn"));
    const QString shown = transcript.plainText();
    CHECK(shown.contains(QStringLiteral("First question")));
    CHECK(shown.contains(QStringLiteral("First answer.")));
    CHECK(shown.contains(QStringLiteral("12.5 tokens/s")));
    CHECK(shown.contains(QStringLiteral("ended its turn")));
    CHECK(shown.contains(QStringLiteral("edit")));
    CHECK(shown.contains(QStringLiteral("regenerate")));
    // Dropping the reply takes its text away.
    c.truncate(1);
    CHECK_FALSE(transcript.plainText().contains(QStringLiteral("First answer.")));
    CHECK(transcript.plainText().contains(QStringLiteral("First question")));
}
