#pragma once
// JSON from files Strata did not write (config.json, generation_config.json, the shard index, params.json,
// tokenizer.json, tokenizer_config.json, safetensors headers). nlohmann's dump() and our own walks recurse, so a
// file nested a few hundred thousand levels deep would overflow the stack: nesting is checked before parsing,
// and values go into messages only through describe(), which prints scalars (cut short) and never a container.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace strata::untrusted_json {

// No JSON file Strata reads nests deeper than a few levels (tokenizer.json's pre_tokenizer: about 5).
constexpr int kMaxDepth = 64;

// The byte offset where nesting first goes deeper than max_depth (brackets inside strings do not count).
std::optional<size_t> too_deep(std::string_view text, int max_depth = kMaxDepth);

// Parses `text`; throws E("<where>: ...") for nesting deeper than kMaxDepth or invalid JSON.
template <class E>
nlohmann::json parse(std::string_view text, const std::string& where) {
    if (const auto at = too_deep(text))
        throw E(where + ": JSON nested deeper than " + std::to_string(kMaxDepth) + " levels at byte " +
                std::to_string(*at) + " (no file of this kind nests so deeply)");
    try {
        return nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        throw E(where + ": not valid JSON (" + std::to_string(text.size()) + " bytes): " + e.what());
    }
}

// A value for an error message: a scalar as JSON text (at most `max` characters, valid UTF-8), a container as
// "an array of N values" / "an object of N keys".
std::string describe(const nlohmann::json& v, size_t max = 60);

}  // namespace strata::untrusted_json
