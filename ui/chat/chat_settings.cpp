#include "chat/chat_settings.hpp"

#include <QSettings>

namespace strata::ui {

namespace {
const char* kTemperature = "chat/temperature";
const char* kTopK = "chat/topK";
const char* kTopP = "chat/topP";
const char* kMinP = "chat/minP";
const char* kSeed = "chat/seed";
const char* kMaxTokens = "chat/maxTokens";
const char* kContext = "chat/contextLength";
const char* kKvCacheF16 = "chat/kvCacheF16";
const char* kSystem = "chat/systemPrompt";
}  // namespace

ChatSettings loadChatSettings() {
    const QSettings q;
    const ChatSettings d;
    ChatSettings s;
    s.sampler.temperature = q.value(kTemperature, double(d.sampler.temperature)).toFloat();
    s.sampler.top_k = q.value(kTopK, qlonglong(d.sampler.top_k)).toLongLong();
    s.sampler.top_p = q.value(kTopP, double(d.sampler.top_p)).toFloat();
    s.sampler.min_p = q.value(kMinP, double(d.sampler.min_p)).toFloat();
    s.sampler.seed = q.value(kSeed, qulonglong(d.sampler.seed)).toULongLong();
    s.maxTokens = q.value(kMaxTokens, qlonglong(d.maxTokens)).toLongLong();
    s.contextLength = q.value(kContext, qlonglong(d.contextLength)).toLongLong();
    s.kvCacheF16 = q.value(kKvCacheF16, d.kvCacheF16).toBool();
    return s;
}

void saveChatSettings(const ChatSettings& s) {
    QSettings q;
    q.setValue(kTemperature, double(s.sampler.temperature));
    q.setValue(kTopK, qlonglong(s.sampler.top_k));
    q.setValue(kTopP, double(s.sampler.top_p));
    q.setValue(kMinP, double(s.sampler.min_p));
    q.setValue(kSeed, qulonglong(s.sampler.seed));
    q.setValue(kMaxTokens, qlonglong(s.maxTokens));
    q.setValue(kContext, qlonglong(s.contextLength));
    q.setValue(kKvCacheF16, s.kvCacheF16);
}

QString defaultSystemPrompt() { return QStringLiteral("You are a helpful assistant."); }

QString loadSystemPrompt() { return QSettings().value(kSystem, defaultSystemPrompt()).toString(); }

void saveSystemPrompt(const QString& text) { QSettings().setValue(kSystem, text); }

}  // namespace strata::ui
