#pragma once
// The conversation as the chat window holds it: the person's messages and the model's replies, each reply with
// its generated tokens (and the cheap record of each token's step), the exact token sequence it continued, and the
// settings it was sampled with. It builds the request for the next reply and the token sequence up to any
// generated token (for the explorer). Signals tell the transcript what changed.
#include <vector>

#include <QObject>
#include <QString>

#include "chat/chat_types.hpp"

namespace strata::ui {

struct ChatEntry {
    QString role;                        // "user" or "assistant" (completion mode: the text typed, the continuation)
    QString content;                     // the text; a reply's is what its tokens released (complete UTF-8)
    // Replies only:
    std::vector<ChatTokenPtr> tokens;    // in order
    std::vector<int32_t> promptTokens;   // the sequence the reply continued (template applied)
    int64_t reusedTokens = 0;            // of those, kept in the KV cache from before
    SamplerSettings sampler;             // what it was sampled with
    int attempt = 0;                     // 0 first, 1.. regenerated (the seed is sampler.seed + attempt)
    bool streaming = false;
    QString note;                        // how it ended, for a person ("stopped", "reached 256 tokens", ...)
    double tokensPerSecond = 0.0;

    bool isReply() const { return role == QLatin1String("assistant"); }
};

class Conversation : public QObject {
    Q_OBJECT
public:
    explicit Conversation(QObject* parent = nullptr);

    ChatMode mode() const { return mode_; }
    void setMode(ChatMode mode);  // clears the conversation when it changes
    const QString& systemPrompt() const { return system_; }
    void setSystemPrompt(const QString& text) { system_ = text; }

    const std::vector<ChatEntry>& entries() const { return entries_; }
    const ChatEntry& entry(int i) const { return entries_[size_t(i)]; }
    int size() const { return int(entries_.size()); }
    bool streaming() const { return !entries_.empty() && entries_.back().streaming; }
    int lastReply() const;  // index of the last reply, -1 when none

    void clear();
    int addUser(const QString& text);
    // A streaming reply at the end.
    int beginReply(const SamplerSettings& sampler, int attempt);
    void setReplyPrompt(const std::vector<int32_t>& promptTokens, int64_t reused);
    void appendToken(const ChatTokenPtr& token);
    // Ends the streaming reply: appends the outcome's tail and a note on how it ended.
    void finishReply(const ChatOutcome& outcome, const QString& note);
    // Drops entries >= n.
    void truncate(int n);
    // Puts back entries saved before (a message that did not fit leaves the conversation as it was).
    void setEntries(std::vector<ChatEntry> entries);

    // The request for the next reply (without a streaming one): chat mode sends the system prompt (when not
    // empty) and every message; completion mode sends the text of every entry joined as one document.
    ChatRequest request(const ChatSettings& settings, int attempt = 0) const;
    // The tokens the model had seen once it generated token `index` of reply `entry` (its prompt, the reply's
    // tokens up to and including that one). Empty when there is no such token.
    std::vector<int32_t> tokensThrough(int entry, int index) const;
    // The first token of the piece of text that token `index` belongs to (tokens that release no text, such as
    // the first half of a split emoji, belong to the piece the next token completes).
    static int pieceStart(const ChatEntry& reply, int index);

signals:
    void reset();                          // anything may have changed: draw it all again
    void appended(int entry);              // a new entry at the end
    void tokenAppended(int entry, int index);
    void entryFinished(int entry);

private:
    ChatMode mode_ = ChatMode::Chat;
    QString system_;
    std::vector<ChatEntry> entries_;
};

}  // namespace strata::ui
