// Bad tokenizer files and bad requests: each a typed error that names the file and what is wrong.
#include "catch.hpp"
#include "test_tokenizer_common.hpp"

using namespace strata;
using namespace strata::test;
namespace fs = std::filesystem;

namespace {

// A tiny rank file: the 256 single bytes, ranks 0..255 (base64 written by hand for a few, the rest generated).
std::string byte_rank_lines() {
    static const char* abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    for (int b = 0; b < 256; ++b) {
        // One byte is two base64 digits and "==".
        out += abc[b >> 2];
        out += abc[(b & 3) << 4];
        out += "== " + std::to_string(b) + "\n";
    }
    return out;
}

std::string tiktoken_error(const std::string& text) {
    return error_of<TokenizerError>([&] { Tokenizer::from_tiktoken_text(text, "t.model"); });
}

}  // namespace

TEST_CASE("tokenizer files that do not exist", "[tokenizer]") {
    auto dir = temp_dir("tok-missing");
    auto msg = error_of<TokenizerError>([&] { Tokenizer::from_hf_json(dir / "tokenizer.json"); });
    CHECK(contains(msg, "not found"));
    CHECK(contains(msg, (dir / "tokenizer.json").string()));
    msg = error_of<TokenizerError>([&] { Tokenizer::from_tiktoken(dir / "tokenizer.model"); });
    CHECK(contains(msg, (dir / "tokenizer.model").string()));
    // A folder with neither file: the folder and both names.
    msg = error_of<TokenizerError>([&] { load_tokenizer_for(dir); });
    CHECK(contains(msg, dir.string()));
    CHECK(contains(msg, "tokenizer.json"));
    CHECK(contains(msg, "tokenizer.model"));
    msg = error_of<TokenizerError>([&] { load_tokenizer_for(dir / "nope"); });
    CHECK(contains(msg, "does not exist"));
}

TEST_CASE("tokenizer.json that is truncated or not a tokenizer", "[tokenizer]") {
    auto dir = temp_dir("tok-json");
    const std::string real = read_file(tokenizer_json());
    auto truncated = dir / "truncated.json";
    write_file(truncated, std::string_view(real).substr(0, real.size() / 2));
    auto msg = error_of<TokenizerError>([&] { Tokenizer::from_hf_json(truncated); });
    CHECK(contains(msg, truncated.string()));
    CHECK(contains(msg, "not valid JSON"));

    auto check = [&](const std::string& name, const std::string& text, const std::string& expect) {
        auto f = dir / name;
        write_file(f, text);
        auto m = error_of<TokenizerError>([&] { Tokenizer::from_hf_json(f); });
        INFO(m);
        CHECK(contains(m, f.string()));
        CHECK(contains(m, expect));
    };
    check("array.json", "[1,2]", "expected a JSON object");
    check("nomodel.json", "{}", "no \"model\"");
    check("wordpiece.json", R"({"model":{"type":"WordPiece","vocab":{"a":0}}})", "expected \"BPE\"");
    check("novocab.json", R"({"model":{"type":"BPE"}})", "model.vocab");
    check("badid.json", R"({"model":{"type":"BPE","vocab":{"a":-3}}})", "expected an id");
    check("farid.json", R"({"model":{"type":"BPE","vocab":{"a":0,"b":1999999999}}})", "expected an id in 0..1 (the file has 2 tokens)");
    check("notgpt2.json", R"({"model":{"type":"BPE","vocab":{"▁the":0}}})", "GPT-2 byte-to-unicode");
    check("fewbytes.json", R"({"model":{"type":"BPE","vocab":{"a":0,"b":1}}})", "all 256 single bytes");
    check("hole.json", R"({"model":{"type":"BPE","vocab":{"a":0,"b":2}}})", "expected an id in 0..1");
    check("otherregex.json", R"({"pre_tokenizer":{"type":"Split","pattern":{"Regex":"\\s+"}},"model":{"type":"BPE","vocab":{"a":0}}})",
          "expected Llama 3's pattern");
    check("badadded.json", R"({"model":{"type":"BPE","vocab":{"a":0}},"added_tokens":[{"id":"x","content":"<s>"}]})",
          "added_tokens[0]");
}

TEST_CASE("tokenizer.model lines that are wrong", "[tokenizer]") {
    const std::string good = byte_rank_lines();
    auto t = Tokenizer::from_tiktoken_text(good, "t.model");
    CHECK(t.vocab_size() == 256 + 256);
    CHECK(t.encode("hi") == std::vector<int32_t>{'h', 'i'});
    // Windows line ends and a trailing blank line are fine.
    CHECK(Tokenizer::from_tiktoken_text(good + "\r\n", "t.model").vocab_size() == 512);

    std::string m = tiktoken_error(good + "aGk= abc\n");
    CHECK(contains(m, "t.model:257:"));
    CHECK(contains(m, "rank \"abc\""));
    m = tiktoken_error(good + "aGk= -5\n");
    CHECK(contains(m, "not a non-negative integer"));
    m = tiktoken_error(good + "aGk= 99999999999999999999\n");
    CHECK(contains(m, "not a non-negative integer"));
    m = tiktoken_error(good + "a@k= 256\n");
    CHECK(contains(m, "t.model:257:"));
    CHECK(contains(m, "not valid base64"));
    m = tiktoken_error(good + "aGk 256\n");
    CHECK(contains(m, "not valid base64"));
    m = tiktoken_error(good + "aGl= 256\n");  // non-zero bits under the padding
    CHECK(contains(m, "not valid base64"));
    m = tiktoken_error(good + "aGk= 17\n");
    CHECK(contains(m, "rank 17 is already used on line 18"));
    m = tiktoken_error(good + "YQ== 256\n");  // "a" again
    CHECK(contains(m, "already have rank 97"));
    m = tiktoken_error(good + "aGk= 300\n");  // 257 lines cannot reach rank 300: a gap somewhere
    CHECK(contains(m, "rank 300 is out of range: 257 lines give ranks 0..256"));
    m = tiktoken_error(good + "aGk= 2000000000\n");  // refused before anything is allocated for it
    CHECK(contains(m, "out of range"));
    m = tiktoken_error(good + "aGk=\n");
    CHECK(contains(m, "expected \"BASE64 RANK\""));
    m = tiktoken_error("");
    CHECK(contains(m, "no tokens"));
    m = tiktoken_error("aGk= 0\n");
    CHECK(contains(m, "all 256 single bytes"));
}

TEST_CASE("GGUF vocabulary arrays that are wrong", "[tokenizer]") {
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b) tokens.push_back(bytes_to_gpt2_unicode(std::string(1, char(b))));
    tokens.push_back("<|eot_id|>");
    std::vector<int32_t> types(256, 1);
    types.push_back(3);
    auto t = Tokenizer::from_gguf_vocab(tokens, types, {});
    CHECK(t.special_id("<|eot_id|>") == 256);

    auto msg = error_of<TokenizerError>([&] { Tokenizer::from_gguf_vocab(tokens, std::vector<int32_t>(3, 1), {}); });
    CHECK(contains(msg, "token_type has 3 entries"));
    auto bad_types = types;
    bad_types[10] = 9;
    msg = error_of<TokenizerError>([&] { Tokenizer::from_gguf_vocab(tokens, bad_types, {}); });
    CHECK(contains(msg, "token 10"));
    CHECK(contains(msg, "type 9"));
    auto bad_tokens = tokens;
    bad_tokens[65] = "\xE2\x96\x81";  // SentencePiece's "▁": not a GPT-2 byte string
    msg = error_of<TokenizerError>([&] { Tokenizer::from_gguf_vocab(bad_tokens, types, {}); });
    CHECK(contains(msg, "token 65"));
    CHECK(contains(msg, "GPT-2"));
    msg = error_of<TokenizerError>([&] { Tokenizer::from_gguf_vocab(tokens, types, {"ab"}); });
    CHECK(contains(msg, "merge 0"));
    msg = error_of<TokenizerError>([&] { Tokenizer::from_gguf_vocab(tokens, types, {"a b"}); });
    CHECK(contains(msg, "not a token"));
    msg = error_of<TokenizerError>([&] { Tokenizer::from_gguf_vocab({}, {}, {}); });
    CHECK(contains(msg, "empty"));
}

TEST_CASE("requests the tokenizer cannot serve", "[tokenizer]") {
    const auto& tok = llama3_tokenizer();
    // Invalid UTF-8 is refused with its byte offset, never guessed at (and never reaches PCRE2).
    for (const auto& [text, offset] : std::vector<std::pair<std::string, size_t>>{
             {"ab\xFF" "cd", 2}, {"ok \xC3(", 3}, {"\xED\xA0\x80", 0}, {"\xC0\xAF", 0}, {"x\xF4\x90\x80\x80", 1},
             {"trail\xE2\x82", 5}, {"\x80", 0}}) {
        auto msg = error_of<InputError>([&] { tok.encode(text); });
        INFO(msg);
        CHECK(contains(msg, "not valid UTF-8 at byte " + std::to_string(offset)));
        CHECK(error_of<InputError>([&] { tok.encode(text, true); }) == msg);
    }
    // NUL and every other valid code point are text.
    CHECK(tok.decode(tok.encode(std::string("a\0b", 3))) == std::string("a\0b", 3));
    CHECK(tok.decode(tok.encode("\xF4\x8F\xBF\xBF")) == "\xF4\x8F\xBF\xBF");

    auto msg = error_of<InputError>([&] { tok.token_bytes(128256); });
    CHECK(contains(msg, "token id 128256 is out of range"));
    CHECK(contains(msg, "0..128255"));
    CHECK(contains(error_of<InputError>([&] { tok.token_bytes(-1); }), "token id -1"));
    CHECK(contains(error_of<InputError>([&] { tok.decode({9906, 999999}); }), "999999"));
    StreamDecoder d(tok);
    CHECK(contains(error_of<InputError>([&] { d.push(-7); }), "-7"));

    Tokenizer none;
    CHECK(none.empty());
    CHECK(none.vocab_size() == 0);
    CHECK(none.specials().empty());
    CHECK(contains(error_of<TokenizerError>([&] { none.encode("x"); }), "no tokenizer"));
}

TEST_CASE("from_ranks refuses inconsistent vocabularies", "[tokenizer]") {
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, char(b)));
    auto with = [&](std::vector<std::string> extra, std::vector<std::pair<std::string, int32_t>> specials) {
        auto v = bytes;
        for (auto& e : extra) v.push_back(e);
        return error_of<TokenizerError>([&] { Tokenizer::from_ranks(v, specials); });
    };
    CHECK(contains(with({"ab", "ab"}, {}), "same bytes"));
    CHECK(contains(with({}, {{"<a>", 256}, {"<b>", 256}}), "share id 256"));
    CHECK(contains(with({}, {{"<a>", 256}, {"<a>", 257}}), "appears twice"));
    CHECK(contains(with({}, {{"<a>", 65}}), "already the normal token"));
    CHECK(contains(with({}, {{"", 256}}), "empty text"));
    CHECK(contains(with({}, {{"\xFF", 256}}), "not valid UTF-8"));
    CHECK(contains(with({}, {{"<a>", 258}}), "token id 256 has neither"));
}
