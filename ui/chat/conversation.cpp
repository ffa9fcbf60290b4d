#include "chat/conversation.hpp"

namespace strata::ui {

Conversation::Conversation(QObject* parent) : QObject(parent) {}

void Conversation::setMode(ChatMode mode) {
    if (mode == mode_) return;
    mode_ = mode;
    clear();
}

int Conversation::lastReply() const {
    for (int i = size() - 1; i >= 0; --i)
        if (entries_[size_t(i)].isReply()) return i;
    return -1;
}

void Conversation::clear() {
    entries_.clear();
    emit reset();
}

int Conversation::addUser(const QString& text) {
    ChatEntry e;
    e.role = QStringLiteral("user");
    e.content = text;
    entries_.push_back(std::move(e));
    emit appended(size() - 1);
    return size() - 1;
}

int Conversation::beginReply(const SamplerSettings& sampler, int attempt) {
    ChatEntry e;
    e.role = QStringLiteral("assistant");
    e.sampler = sampler;
    e.attempt = attempt;
    e.streaming = true;
    entries_.push_back(std::move(e));
    emit appended(size() - 1);
    return size() - 1;
}

void Conversation::setReplyPrompt(const std::vector<int32_t>& promptTokens, int64_t reused) {
    if (!streaming()) return;
    entries_.back().promptTokens = promptTokens;
    entries_.back().reusedTokens = reused;
}

void Conversation::appendToken(const ChatTokenPtr& token) {
    if (!streaming() || !token) return;
    ChatEntry& e = entries_.back();
    e.tokens.push_back(token);
    e.content += token->text;
    emit tokenAppended(size() - 1, int(e.tokens.size()) - 1);
}

void Conversation::finishReply(const ChatOutcome& outcome, const QString& note) {
    if (!streaming()) return;
    ChatEntry& e = entries_.back();
    e.streaming = false;
    e.content += outcome.tail;
    e.note = note;
    e.tokensPerSecond = outcome.tokensPerSecond;
    emit entryFinished(size() - 1);
}

void Conversation::truncate(int n) {
    if (n < 0 || n >= size()) return;
    entries_.resize(size_t(n));
    emit reset();
}

void Conversation::setEntries(std::vector<ChatEntry> entries) {
    entries_ = std::move(entries);
    emit reset();
}

ChatRequest Conversation::request(const ChatSettings& settings, int attempt) const {
    ChatRequest r;
    r.mode = mode_;
    r.sampler = settings.sampler;
    r.sampler.seed = settings.sampler.seed + uint64_t(attempt);
    r.maxTokens = settings.maxTokens;
    r.contextLength = settings.contextLength;
    r.kvCacheF16 = settings.kvCacheF16;
    if (mode_ == ChatMode::Chat && !system_.trimmed().isEmpty())
        r.messages.push_back({"system", system_.toStdString()});
    for (const ChatEntry& e : entries_) {
        if (e.streaming) continue;
        if (mode_ == ChatMode::Chat)
            r.messages.push_back({e.role.toStdString(), e.content.toStdString()});
        else
            r.document += e.content.toStdString();
    }
    return r;
}

std::vector<int32_t> Conversation::tokensThrough(int entry, int index) const {
    if (entry < 0 || entry >= size()) return {};
    const ChatEntry& e = entries_[size_t(entry)];
    if (!e.isReply() || index < 0 || index >= int(e.tokens.size())) return {};
    std::vector<int32_t> ids = e.promptTokens;
    for (int i = 0; i <= index; ++i) ids.push_back(e.tokens[size_t(i)]->id);
    return ids;
}

int Conversation::pieceStart(const ChatEntry& reply, int index) {
    while (index > 0 && reply.tokens[size_t(index - 1)]->text.isEmpty()) --index;
    return index;
}

}  // namespace strata::ui
