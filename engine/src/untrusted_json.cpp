#include "untrusted_json.hpp"

#include <algorithm>

namespace strata::untrusted_json {

std::optional<size_t> too_deep(std::string_view text, int max_depth) {
    int depth = 0;
    bool in_string = false, escaped = false;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (escaped) escaped = false;
            else if (c == '\\') escaped = true;
            else if (c == '"') in_string = false;
            continue;
        }
        if (c == '"') in_string = true;
        else if (c == '[' || c == '{') {
            if (++depth > max_depth) return i;
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
    return std::nullopt;
}

std::string describe(const nlohmann::json& v, size_t max) {
    if (v.is_array()) {
        // A short list of scalars (architectures, eos_token_id) is shown; anything else by its size.
        const bool flat = v.size() <= 8 && std::none_of(v.begin(), v.end(), [](const nlohmann::json& x) {
                              return x.is_structured();
                          });
        if (!flat) return "an array of " + std::to_string(v.size()) + " values";
        std::string s = "[";
        for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + describe(v[i], max);
        return s + "]";
    }
    if (v.is_object()) return "an object of " + std::to_string(v.size()) + " keys";
    // A scalar: dump() does not recurse here; invalid UTF-8 in a string becomes U+FFFD instead of throwing.
    std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (s.size() > max) {
        size_t cut = max;
        while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
        s = s.substr(0, cut) + "...";
    }
    return s;
}

}  // namespace strata::untrusted_json
