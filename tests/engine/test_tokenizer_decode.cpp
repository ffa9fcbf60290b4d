// Decoding: streaming that only emits whole characters, GPT-2 byte strings, pieces shown as valid UTF-8.
#include <set>

#include "catch.hpp"
#include "test_tokenizer_common.hpp"

using namespace strata;
using namespace strata::test;

TEST_CASE("streaming decode holds a split emoji until it is whole", "[tokenizer]") {
    const auto& tok = llama3_tokenizer();
    const std::string llama = "\xF0\x9F\xA6\x99";  // U+1F999, which Llama 3 splits over several byte tokens
    const std::string text = "I love " + llama + " and \xE4\xBD\xA0\xE5\xA5\xBD!";
    auto ids = tok.encode(text);
    // The emoji is not one token: check the split is really there, or this test proves nothing.
    int partial_tokens = 0;
    for (int32_t id : ids)
        if (to_valid_utf8(tok.token_bytes(id)) != tok.token_bytes(id)) ++partial_tokens;
    REQUIRE(partial_tokens >= 2);

    StreamDecoder d(tok);
    std::string out;
    int emoji_seen = 0;
    for (int32_t id : ids) {
        std::string chunk = d.push(id);
        CHECK(to_valid_utf8(chunk) == chunk);  // never a broken character
        if (chunk.find(llama) != std::string::npos) ++emoji_seen;
        out += chunk;
    }
    out += d.flush();
    CHECK(emoji_seen == 1);
    CHECK(out == text);
}

TEST_CASE("streaming decode: dangling and invalid bytes become U+FFFD", "[tokenizer]") {
    const auto& tok = llama3_tokenizer();
    const std::string fffd = "\xEF\xBF\xBD";
    auto ids = tok.encode("\xF0\x9F\xA6\x99");
    REQUIRE(ids.size() >= 2);
    StreamDecoder d(tok);
    CHECK(d.push(ids[0]).empty());
    CHECK(d.flush() == fffd);  // the partial character, once
    CHECK(d.flush().empty());

    // A byte that can never start a character is not held back: it comes out at once, then text resumes.
    const auto lone = tok.encode("\xC3\xA9");  // é: check which byte tokens exist for a stray continuation byte
    StreamDecoder e(tok);
    int32_t cont = -1;
    for (int32_t id = 0; id < 256 && cont < 0; ++id)
        if (tok.token_bytes(id) == "\xA9") cont = id;
    REQUIRE(cont >= 0);
    CHECK(e.push(cont) == fffd);
    CHECK(e.push(tok.encode("ok")[0]) == "ok");
    // An incomplete lead followed by ASCII: one U+FFFD for the broken part, then the letter.
    int32_t lead = -1;
    for (int32_t id = 0; id < 256 && lead < 0; ++id)
        if (tok.token_bytes(id) == "\xE2") lead = id;
    REQUIRE(lead >= 0);
    CHECK(e.push(lead).empty());
    CHECK(e.push(tok.encode("a")[0]) == fffd + "a");
    // Special tokens stream as their text.
    CHECK(e.push(128009) == "<|eot_id|>");
    CHECK(e.flush().empty());
    CHECK(tok.decode(lone) == "\xC3\xA9");
}

TEST_CASE("to_valid_utf8 replaces each maximal invalid part once", "[tokenizer]") {
    const std::string r = "\xEF\xBF\xBD";
    CHECK(to_valid_utf8("plain \xE4\xBD\xA0") == "plain \xE4\xBD\xA0");
    CHECK(to_valid_utf8("\xE2\x82") == r);                    // truncated 3-byte character
    CHECK(to_valid_utf8("\xE2\x82" "A") == r + "A");
    CHECK(to_valid_utf8("\x80\x80") == r + r);               // two stray continuation bytes
    CHECK(to_valid_utf8("\xC0\xAF") == r + r);               // overlong '/'
    CHECK(to_valid_utf8("\xED\xA0\x80") == r + r + r);       // a surrogate: ED is valid only before 80..9F
    CHECK(to_valid_utf8("\xF0\x9F\xA6") == r);               // emoji cut short
    CHECK(to_valid_utf8("\xF4\x90\x80\x80") == r + r + r + r);  // above U+10FFFF
    CHECK(to_valid_utf8("") == "");
}

TEST_CASE("GPT-2 byte-to-unicode round-trips every byte", "[tokenizer]") {
    std::string all;
    for (int b = 0; b < 256; ++b) all += char(b);
    std::string u = bytes_to_gpt2_unicode(all);
    CHECK(gpt2_unicode_to_bytes(u) == all);
    CHECK(bytes_to_gpt2_unicode(" ") == "\xC4\xA0");   // Ġ
    CHECK(bytes_to_gpt2_unicode("\n") == "\xC4\x8A");  // Ċ
    CHECK(bytes_to_gpt2_unicode("A~") == "A~");
    CHECK(bytes_to_gpt2_unicode("\xAD") == "\xC5\x83");  // the soft hyphen is the last remapped byte, U+0143
    CHECK(gpt2_unicode_to_bytes("\xC4\xA0hello") == " hello");
    CHECK(gpt2_unicode_to_bytes(" ") == std::nullopt);       // a raw space is not in the table
    CHECK(gpt2_unicode_to_bytes("\xE2\x96\x81") == std::nullopt);
    CHECK(gpt2_unicode_to_bytes("\xC5\x84") == std::nullopt);  // U+0144: just past the table
    CHECK(gpt2_unicode_to_bytes("\xC4") == std::nullopt);
    // Every code point the table uses is distinct: 256 different strings.
    std::set<std::string> seen;
    for (int b = 0; b < 256; ++b) seen.insert(bytes_to_gpt2_unicode(std::string(1, char(b))));
    CHECK(seen.size() == 256);
}

TEST_CASE("load_tokenizer_for: folders and files", "[tokenizer]") {
    auto dir = temp_dir("tok-for");
    std::filesystem::create_symlink(tokenizer_json(), dir / "tokenizer.json");
    CHECK(load_tokenizer_for(dir).vocab_size() == 128256);
    CHECK(load_tokenizer_for(dir / "tokenizer.json").encode("Hello world!") == std::vector<int32_t>{9906, 1917, 0});

    // A Meta folder: tokenizer.model, and params.json deciding the special names.
    auto meta = temp_dir("tok-for-meta");
    std::string model;
    const auto& tok = llama3_tokenizer();
    static const char* abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int b = 0; b < 256; ++b)
        model += std::string{abc[b >> 2], abc[(b & 3) << 4], '=', '='} + " " + std::to_string(b) + "\n";
    write_file(meta / "tokenizer.model", model);
    CHECK(load_tokenizer_for(meta).special_id("<|reserved_special_token_4|>") == 256 + 8);
    write_file(meta / "params.json", R"({"dim": 4096, "use_scaled_rope": true})");
    CHECK(load_tokenizer_for(meta).special_id("<|eom_id|>") == 256 + 8);
    CHECK(load_tokenizer_for(meta / "tokenizer.model").special_id("<|eom_id|>") == std::nullopt);
    CHECK(tok.vocab_size() == 128256);
    write_file(meta / "x.gguf", "GGUF");
    CHECK(contains(error_of<TokenizerError>([&] { load_tokenizer_for(meta / "x.gguf"); }), "GGUF"));
}
