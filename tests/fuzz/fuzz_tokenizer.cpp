// libFuzzer target for the tokenizer: encode arbitrary bytes (round trip, streaming decode), and build
// tokenizers from arbitrary tokenizer.model / tokenizer.json / GGUF vocabulary input. Only typed errors may come
// out; anything else (a crash, a sanitizer report, a broken invariant) is a finding.
//   ./tests/fuzz/fuzz_tokenizer -max_total_time=180 corpus/
// Uses the real Llama 3 tokenizer from STRATA_TOKENIZER_JSON or ~/.cache/strata/tokenizer/tokenizer.json when
// present, else a small byte-level vocabulary built here.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "strata/error.hpp"
#include "strata/tokenizer.hpp"

namespace {

strata::Tokenizer* g_tok = nullptr;

strata::Tokenizer small_vocabulary() {
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) bytes.emplace_back(1, char(b));
    for (const char* t : {"th", "the", " the", "in", "ing", "  ", "    ", "\n\n", "er", "an", "\xE4\xBD", "\xE4\xBD\xA0"})
        bytes.emplace_back(t);
    return strata::Tokenizer::from_ranks(bytes, {{"<|begin_of_text|>", int32_t(bytes.size())},
                                                 {"<|eot_id|>", int32_t(bytes.size() + 1)}});
}

void check(bool ok) {
    if (!ok) __builtin_trap();
}

void fuzz_encode(const strata::Tokenizer& tok, std::string_view text, bool special) {
    std::vector<int32_t> ids;
    try {
        ids = tok.encode(text, special);
    } catch (const strata::InputError&) {
        return;  // invalid UTF-8: refused, as documented
    }
    check(tok.decode(ids) == text);
    strata::StreamDecoder d(tok);
    std::string streamed;
    for (int32_t id : ids) streamed += d.push(id);
    streamed += d.flush();
    check(streamed == text);
    if (!special)
        for (int32_t id : ids) check(!tok.is_special(id));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    std::filesystem::path p;
    if (const char* e = std::getenv("STRATA_TOKENIZER_JSON")) p = e;
    else if (const char* h = std::getenv("HOME")) p = std::filesystem::path(h) / ".cache/strata/tokenizer/tokenizer.json";
    std::error_code ec;
    g_tok = new strata::Tokenizer(std::filesystem::exists(p, ec) ? strata::Tokenizer::from_hf_json(p) : small_vocabulary());
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
    const uint8_t mode = data[0];
    try {
        switch (mode % 6) {
            case 0:
            case 1:
                fuzz_encode(*g_tok, in, mode & 1);
                break;
            case 2: {
                // Decoding arbitrary ids: out-of-range ones are InputError; the rest stream to valid UTF-8.
                strata::StreamDecoder d(*g_tok);
                std::string out;
                for (size_t i = 0; i + 3 <= in.size(); i += 3) {
                    int32_t id = int32_t(uint8_t(in[i])) | int32_t(uint8_t(in[i + 1])) << 8 | int32_t(uint8_t(in[i + 2])) << 16;
                    try {
                        out += d.push(id);
                    } catch (const strata::InputError&) {
                    }
                }
                out += d.flush();
                check(strata::to_valid_utf8(out) == out);
                break;
            }
            case 3: {
                auto t = strata::Tokenizer::from_tiktoken_text(in, "fuzz.model");
                fuzz_encode(t, "Hello <|eot_id|> world \xE4\xBD\xA0", true);
                break;
            }
            case 4: {
                auto t = strata::Tokenizer::from_hf_json_text(in, "fuzz.json");
                fuzz_encode(t, "Hello world", false);
                break;
            }
            case 5: {
                // GGUF arrays: lines are tokens; a line's first byte picks its type.
                std::vector<std::string> tokens, merges;
                std::vector<int32_t> types;
                size_t pos = 0;
                while (pos < in.size()) {
                    size_t nl = in.find('\n', pos);
                    std::string_view line = in.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
                    pos = nl == std::string_view::npos ? in.size() : nl + 1;
                    if (line.empty()) continue;
                    if (line[0] == 'm') merges.emplace_back(line.substr(1));
                    else {
                        types.push_back(int32_t(uint8_t(line[0])) % 8);
                        tokens.emplace_back(line.substr(1));
                    }
                }
                auto t = strata::Tokenizer::from_gguf_vocab(tokens, types, merges);
                fuzz_encode(t, "fuzz", false);
                break;
            }
        }
    } catch (const strata::TokenizerError&) {
    } catch (const strata::InputError&) {
    }
    return 0;
}
