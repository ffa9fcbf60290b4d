#pragma once
// The chat's sampling settings and system prompt, persisted between runs with QSettings (group "chat").
#include <QString>

#include "chat/chat_types.hpp"

namespace strata::ui {

ChatSettings loadChatSettings();
void saveChatSettings(const ChatSettings& settings);

QString defaultSystemPrompt();
QString loadSystemPrompt();
void saveSystemPrompt(const QString& text);

}  // namespace strata::ui
