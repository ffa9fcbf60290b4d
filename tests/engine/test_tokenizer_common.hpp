#pragma once
// Shared by the tokenizer tests: the real Llama 3 tokenizer (loaded once), the reference cases, and a helper
// that returns an exception's message so tests can check it names the file and the problem.
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "strata/error.hpp"
#include "strata/tokenizer.hpp"
#include "support.hpp"

namespace strata::test {

inline const Tokenizer& llama3_tokenizer() {
    static const Tokenizer t = Tokenizer::from_hf_json(tokenizer_json());
    return t;
}

inline const nlohmann::json& tokenizer_cases() {
    static const nlohmann::json j = [] {
        std::ifstream f(reference_dir() / "tokenizer_cases.json");
        if (!f) throw std::runtime_error("cannot read tokenizer_cases.json in " + reference_dir().string());
        return nlohmann::json::parse(f);
    }();
    return j.at("cases");
}

inline const nlohmann::json& tokenizer_json_document() {
    static const nlohmann::json j = [] {
        std::ifstream f(tokenizer_json());
        return nlohmann::json::parse(f);
    }();
    return j;
}

// The message of the E thrown by f, or "<no exception>" / "<other exception: ...>".
template <class E>
std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const E& e) {
        return e.what();
    } catch (const std::exception& e) {
        return std::string("<other exception: ") + e.what() + ">";
    }
    return "<no exception>";
}

inline bool contains(const std::string& haystack, const std::string& needle) {
    return haystack.find(needle) != std::string::npos;
}

}  // namespace strata::test
