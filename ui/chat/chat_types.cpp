#include "chat/chat_types.hpp"

namespace strata::ui {

void registerChatTypes() {
    qRegisterMetaType<ChatStartPtr>();
    qRegisterMetaType<ChatTokenPtr>();
    qRegisterMetaType<ChatOutcomePtr>();
    qRegisterMetaType<PositionLogitsPtr>();
}

}  // namespace strata::ui
