#pragma once
// How a token looks in the UI: its bytes as UTF-8 with whitespace made visible (space ␣, newline ↵, tab ⇥),
// and bytes that are not complete UTF-8 shown as <0xAB>.
#include <cstdint>
#include <string_view>

#include <QString>

namespace strata {
class Tokenizer;
}

namespace strata::ui {

QString displayBytes(std::string_view bytes);
QString displayToken(const Tokenizer& tokenizer, int32_t id);

}  // namespace strata::ui
