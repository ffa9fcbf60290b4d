// The Llama 3 tokenizer against the reference ids: from tokenizer.json, from a tokenizer.model and from GGUF
// vocabulary arrays derived from it, plus special tokens and the golden prompts.
#include <algorithm>
#include <atomic>
#include <map>
#include <thread>

#include "catch.hpp"
#include "test_tokenizer_common.hpp"

using namespace strata;
using namespace strata::test;

namespace {

std::string base64(std::string_view bytes) {
    static const char* abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    size_t i = 0;
    for (; i + 3 <= bytes.size(); i += 3) {
        uint32_t v = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
        for (int k = 3; k >= 0; --k) out += abc[(v >> (6 * k)) & 63];
    }
    if (size_t rest = bytes.size() - i; rest) {
        uint32_t v = uint8_t(bytes[i]) << 16;
        if (rest == 2) v |= uint8_t(bytes[i + 1]) << 8;
        out += abc[(v >> 18) & 63];
        out += abc[(v >> 12) & 63];
        out += rest == 2 ? abc[(v >> 6) & 63] : '=';
        out += '=';
    }
    return out;
}

// tokenizer.json's vocabulary as raw bytes by id, decoded here from the JSON document itself.
std::vector<std::string> hf_vocab_bytes() {
    const auto& vocab = tokenizer_json_document().at("model").at("vocab");
    std::vector<std::string> bytes(vocab.size());
    for (const auto& [tok, id] : vocab.items()) {
        auto b = gpt2_unicode_to_bytes(tok);
        REQUIRE(b.has_value());
        bytes.at(id.get<size_t>()) = *b;
    }
    return bytes;
}

// Meta's tokenizer.model as it would be on disk, written from tokenizer.json's vocabulary.
std::filesystem::path write_tokenizer_model() {
    static const std::filesystem::path p = [] {
        auto bytes = hf_vocab_bytes();
        std::string text;
        for (size_t id = 0; id < bytes.size(); ++id) text += base64(bytes[id]) + " " + std::to_string(id) + "\n";
        auto file = temp_dir("tokenizer-model") / "tokenizer.model";
        write_file(file, text);
        return file;
    }();
    return p;
}

void check_cases(const Tokenizer& tok, const std::string& source) {
    int checked = 0;
    for (const auto& c : tokenizer_cases()) {
        const std::string name = c.at("name"), text = c.at("text");
        const auto ids = c.at("ids").get<std::vector<int32_t>>();
        INFO(source << " case " << name << ": " << text);
        if (c.contains("ids_plain")) {
            CHECK(tok.encode(text, true) == ids);
            CHECK(tok.encode(text, false) == c.at("ids_plain").get<std::vector<int32_t>>());
        } else {
            CHECK(tok.encode(text, false) == ids);
        }
        CHECK(tok.decode(ids) == text);
        ++checked;
    }
    CHECK(checked >= 40);
}

}  // namespace

TEST_CASE("tokenizer.json: every reference case", "[tokenizer]") {
    const auto& tok = llama3_tokenizer();
    CHECK(tok.vocab_size() == 128256);
    check_cases(tok, "tokenizer.json");
}

TEST_CASE("tokenizer.model written from tokenizer.json: every reference case, same specials", "[tokenizer]") {
    auto tok = Tokenizer::from_tiktoken(write_tokenizer_model());
    CHECK(tok.vocab_size() == 128256);
    check_cases(tok, "tokenizer.model");

    // Meta's special names for Llama 3 are exactly tokenizer.json's added_tokens.
    std::vector<std::pair<std::string, int32_t>> hf;
    for (const auto& a : tokenizer_json_document().at("added_tokens")) hf.emplace_back(a.at("content"), a.at("id"));
    std::sort(hf.begin(), hf.end(), [](auto& a, auto& b) { return a.second < b.second; });
    REQUIRE(hf.size() == 256);
    CHECK(tok.specials() == hf);
    CHECK(llama3_tokenizer().specials() == hf);
}

TEST_CASE("tokenizer.model with Llama 3.1 names", "[tokenizer]") {
    auto tok = Tokenizer::from_tiktoken(write_tokenizer_model(), MetaSpecials::Llama31);
    CHECK(tok.special_id("<|begin_of_text|>") == 128000);
    CHECK(tok.special_id("<|finetune_right_pad_id|>") == 128004);
    CHECK(tok.special_id("<|start_header_id|>") == 128006);
    CHECK(tok.special_id("<|eom_id|>") == 128008);
    CHECK(tok.special_id("<|eot_id|>") == 128009);
    CHECK(tok.special_id("<|python_tag|>") == 128010);
    CHECK(tok.special_id("<|reserved_special_token_2|>") == 128011);
    CHECK(tok.special_id("<|reserved_special_token_246|>") == 128255);
    CHECK(tok.specials().size() == 256);
    CHECK(tok.encode("<|eom_id|> <|python_tag|>", true) == std::vector<int32_t>{128008, 220, 128010});
    // Plain text stays text whatever the names.
    CHECK(tok.encode("<|eom_id|>") == llama3_tokenizer().encode("<|eom_id|>"));
}

TEST_CASE("GGUF vocabulary derived from tokenizer.json: every reference case", "[tokenizer]") {
    const auto& hf = llama3_tokenizer();
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    for (int32_t id = 0; id < hf.vocab_size(); ++id) {
        tokens.push_back(hf.token_gpt2_string(id));
        types.push_back(hf.is_special(id) ? 3 : 1);
    }
    std::vector<std::string> merges;
    for (const auto& m : tokenizer_json_document().at("model").at("merges"))
        merges.push_back(m.is_string() ? m.get<std::string>() : m.at(0).get<std::string>() + " " + m.at(1).get<std::string>());
    REQUIRE(merges.size() > 200000);
    auto tok = Tokenizer::from_gguf_vocab(tokens, types, merges);
    CHECK(tok.vocab_size() == 128256);
    CHECK(tok.specials() == hf.specials());
    check_cases(tok, "GGUF");
    for (int32_t id : {0, 220, 9906, 127999, 128000, 128255}) CHECK(tok.token_gpt2_string(id) == tokens[size_t(id)]);
}

TEST_CASE("the golden prompts encode to expected.json's tokens", "[tokenizer]") {
    const auto& tok = llama3_tokenizer();
    auto bos = tok.special_id("<|begin_of_text|>");
    REQUIRE(bos == 128000);
    const auto golden = expected();
    for (const char* which : {"short", "long"}) {
        const auto& p = golden.at("prompts").at(which);
        std::vector<int32_t> ids{*bos};
        for (int32_t id : tok.encode(p.at("text").get<std::string>())) ids.push_back(id);
        INFO(which);
        CHECK(ids == p.at("tokens").get<std::vector<int32_t>>());
    }
}

TEST_CASE("special tokens: text unless the caller asks", "[tokenizer]") {
    const auto& tok = llama3_tokenizer();
    CHECK(tok.special_id("<|eot_id|>") == 128009);
    CHECK(tok.special_id("<|end_header_id|>") == 128007);
    CHECK(tok.special_id("<|eom_id|>") == std::nullopt);  // a Llama 3.1 name; this is Llama 3's tokenizer.json
    CHECK(tok.special_id("eot_id") == std::nullopt);

    auto plain = tok.encode("<|eot_id|>");
    CHECK(std::find(plain.begin(), plain.end(), 128009) == plain.end());
    CHECK(plain.size() > 1);
    CHECK(tok.encode("<|eot_id|>", true) == std::vector<int32_t>{128009});

    // Adjacent specials, text around them, and the gaps encoded on their own (the trailing spaces before a
    // special are one piece, as when the gap is the whole subject).
    auto ids = tok.encode("a  <|eot_id|><|eot_id|>b", true);
    REQUIRE(ids.size() >= 4);
    CHECK(std::count(ids.begin(), ids.end(), 128009) == 2);
    CHECK(tok.decode(ids) == "a  <|eot_id|><|eot_id|>b");
    auto gap = tok.encode("a  ");
    CHECK(std::vector<int32_t>(ids.begin(), ids.begin() + long(gap.size())) == gap);

    CHECK(tok.is_special(128000));
    CHECK(tok.is_special(128255));
    CHECK_FALSE(tok.is_special(127999));
    CHECK_FALSE(tok.is_special(-1));
    CHECK_FALSE(tok.is_special(128256));
    CHECK(tok.token_bytes(128009) == "<|eot_id|>");
    CHECK(tok.token_gpt2_string(128009) == "<|eot_id|>");
    CHECK(tok.token_gpt2_string(220) == "\xC4\xA0");  // " " is stored as U+0120
}

TEST_CASE("long runs stay linear and round-trip", "[tokenizer]") {
    const auto& tok = llama3_tokenizer();
    for (const std::string& text : {std::string(200000, ' '), std::string(200000, 'a'), std::string(100000, '\n'),
                                    std::string(50000, '7'), std::string(30000, '!') + "x"}) {
        auto ids = tok.encode(text);
        CHECK(tok.decode(ids) == text);
        CHECK(ids.size() < text.size());
    }
    // 10k spaces then a word: the spaces but one form one piece, the last joins the word.
    auto ids = tok.encode(std::string(10000, ' ') + "word");
    CHECK(tok.decode({ids.back()}) == " word");
}

TEST_CASE("encode is safe from several threads at once", "[tokenizer]") {
    const auto& tok = llama3_tokenizer();
    std::vector<std::pair<std::string, std::vector<int32_t>>> cases;
    for (const auto& c : tokenizer_cases())
        if (!c.contains("ids_plain")) cases.emplace_back(c.at("text"), c.at("ids").get<std::vector<int32_t>>());
    std::atomic<int> mismatches{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            for (int rep = 0; rep < 20; ++rep)
                for (size_t i = 0; i < cases.size(); ++i)
                    if (tok.encode(cases[(i + size_t(t)) % cases.size()].first) != cases[(i + size_t(t)) % cases.size()].second)
                        ++mismatches;
        });
    for (auto& th : threads) th.join();
    CHECK(mismatches == 0);

    // A moved-from tokenizer is empty, and the moved-to one works.
    Tokenizer a = Tokenizer::from_tiktoken(write_tokenizer_model());
    Tokenizer b = std::move(a);
    CHECK(a.empty());
    CHECK(b.encode("Hello world!") == std::vector<int32_t>{9906, 1917, 0});
}
