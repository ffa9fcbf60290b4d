// Building a tokenizer from what checkpoints ship: Hugging Face tokenizer.json, Meta's tokenizer.model (a tiktoken
// rank file) and GGUF's vocabulary arrays. All three end in from_ranks: raw bytes by id (id = BPE rank) plus the
// special tokens. Each failure names the file (or GGUF key) and what was expected vs found.
#include <charconv>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "strata/error.hpp"
#include "strata/tokenizer.hpp"
#include "tokenizer/splitter.hpp"
#include "tokenizer/tokenizer_impl.hpp"
#include "tokenizer/utf8.hpp"
#include "untrusted_json.hpp"

namespace fs = std::filesystem;

namespace strata {

namespace {

std::string read_whole(const fs::path& file) {
    std::error_code ec;
    if (!fs::exists(file, ec)) throw TokenizerError("tokenizer file not found: " + file.string());
    if (fs::is_directory(file, ec)) throw TokenizerError("expected a tokenizer file but found a folder: " + file.string());
    // Llama 3's tokenizer.json is about 9 MB and tokenizer.model 2 MB: a file far larger is not a tokenizer.
    constexpr uintmax_t kMaxBytes = 64ull << 20;
    if (const uintmax_t size = fs::file_size(file, ec); !ec && size > kMaxBytes)
        throw TokenizerError(file.string() + ": " + std::to_string(size) + " bytes is larger than the " +
                             std::to_string(kMaxBytes) + "-byte limit for a tokenizer file");
    std::ifstream in(file, std::ios::binary);
    if (!in) throw TokenizerError("cannot open tokenizer file " + file.string());
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) throw TokenizerError("cannot read tokenizer file " + file.string());
    return std::move(ss).str();
}

std::string shorten(std::string_view s, size_t max = 60) {
    std::string v = to_valid_utf8(s.substr(0, max));
    return s.size() > max ? v + "..." : v;
}

// Strict standard base64 (RFC 4648): the alphabet, '=' only as final padding, length a multiple of four.
std::optional<std::string> base64_decode(std::string_view s) {
    if (s.empty() || s.size() % 4 != 0) return std::nullopt;
    auto value = [](char c) -> int {
        if (c >= 'A' && c <= 'Z') return c - 'A';
        if (c >= 'a' && c <= 'z') return c - 'a' + 26;
        if (c >= '0' && c <= '9') return c - '0' + 52;
        if (c == '+') return 62;
        if (c == '/') return 63;
        return -1;
    };
    size_t pad = 0;
    if (s.back() == '=') pad = s[s.size() - 2] == '=' ? 2 : 1;
    std::string out;
    out.reserve(s.size() / 4 * 3);
    for (size_t i = 0; i < s.size(); i += 4) {
        const bool last = i + 4 == s.size();
        uint32_t acc = 0;
        for (size_t k = 0; k < 4; ++k) {
            char c = s[i + k];
            int v;
            if (last && k >= 4 - pad) v = 0;
            else if ((v = value(c)) < 0) return std::nullopt;
            acc = (acc << 6) | static_cast<uint32_t>(v);
        }
        const size_t keep = last ? 3 - pad : 3;
        // Bits under the padding must be zero, or two spellings would decode to the same bytes.
        if (last && pad == 2 && (acc & 0xFFFF)) return std::nullopt;
        if (last && pad == 1 && (acc & 0xFF)) return std::nullopt;
        for (size_t k = 0; k < keep; ++k) out += static_cast<char>((acc >> (16 - 8 * k)) & 0xFF);
    }
    return out;
}

std::optional<int64_t> parse_rank(std::string_view s) {
    int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size() || v < 0 || s.empty() || s[0] == '+') return std::nullopt;
    return v;
}

// Every regex the pre_tokenizer holds (a Split, possibly inside a Sequence).
void collect_regexes(const nlohmann::json& j, std::vector<std::string>& out) {
    if (j.is_object()) {
        if (auto it = j.find("Regex"); it != j.end() && it->is_string()) out.push_back(it->get<std::string>());
        for (const auto& [k, v] : j.items()) collect_regexes(v, out);
    } else if (j.is_array()) {
        for (const auto& v : j) collect_regexes(v, out);
    }
}

}  // namespace

Tokenizer Tokenizer::from_hf_json(const fs::path& file) { return from_hf_json_text(read_whole(file), file.string()); }

Tokenizer Tokenizer::from_hf_json_text(std::string_view text, const std::string& where) {
    const nlohmann::json j = untrusted_json::parse<TokenizerError>(text, where);
    if (!j.is_object()) throw TokenizerError(where + ": expected a JSON object at the top, found " + std::string(j.type_name()));
    auto model = j.find("model");
    if (model == j.end() || !model->is_object()) throw TokenizerError(where + ": no \"model\" object");
    auto type = model->find("type");
    if (type != model->end() && (!type->is_string() || type->get<std::string>() != "BPE"))
        throw TokenizerError(where + ": model.type is " + untrusted_json::describe(*type) + ", expected \"BPE\" (Llama 3 is byte-level BPE)");
    if (auto pre = j.find("pre_tokenizer"); pre != j.end()) {
        std::vector<std::string> regexes;
        collect_regexes(*pre, regexes);
        for (const auto& r : regexes)
            if (r != tokenizer_detail::kLlama3Pattern)
                throw TokenizerError(where + ": pre_tokenizer splits with " + shorten(r, 120) +
                                     ", expected Llama 3's pattern " + std::string(tokenizer_detail::kLlama3Pattern));
    }
    auto vocab = model->find("vocab");
    if (vocab == model->end() || !vocab->is_object() || vocab->empty())
        throw TokenizerError(where + ": model.vocab is missing or not a non-empty object");

    // Ids must run 0..N-1 over the N tokens given (from_ranks rejects holes); refusing a larger id here also
    // keeps a lying file from making us allocate for it.
    const auto added_it = j.find("added_tokens");
    const int64_t max_id = static_cast<int64_t>(vocab->size()) +
                           (added_it != j.end() && added_it->is_array() ? static_cast<int64_t>(added_it->size()) : 0);
    std::vector<std::string> bytes;
    for (const auto& [token, idj] : vocab->items()) {
        if (!idj.is_number_integer() || idj.get<int64_t>() < 0 || idj.get<int64_t>() >= max_id)
            throw TokenizerError(where + ": model.vocab[\"" + shorten(token) + "\"] is " + untrusted_json::describe(idj) +
                                 ", expected an id in 0.." + std::to_string(max_id - 1) + " (the file has " +
                                 std::to_string(max_id) + " tokens)");
        const auto id = static_cast<size_t>(idj.get<int64_t>());
        auto b = gpt2_unicode_to_bytes(token);
        if (!b || b->empty())
            throw TokenizerError(where + ": model.vocab token \"" + shorten(token) + "\" (id " + std::to_string(id) +
                                 ") is not in GPT-2 byte-to-unicode form");
        if (id >= bytes.size()) bytes.resize(id + 1);
        if (!bytes[id].empty())
            throw TokenizerError(where + ": id " + std::to_string(id) + " appears twice in model.vocab");
        bytes[id] = std::move(*b);
    }

    std::vector<std::pair<std::string, int32_t>> specials;
    if (auto added = j.find("added_tokens"); added != j.end()) {
        if (!added->is_array()) throw TokenizerError(where + ": added_tokens is not an array");
        for (size_t i = 0; i < added->size(); ++i) {
            const auto& a = (*added)[i];
            auto id = a.is_object() ? a.find("id") : a.end();
            auto content = a.is_object() ? a.find("content") : a.end();
            if (!a.is_object() || id == a.end() || content == a.end() || !id->is_number_integer() ||
                !content->is_string() || id->get<int64_t>() < 0 || id->get<int64_t>() >= max_id)
                throw TokenizerError(where + ": added_tokens[" + std::to_string(i) +
                                     "] needs an integer \"id\" in range and a string \"content\", found " + untrusted_json::describe(a));
            specials.emplace_back(content->get<std::string>(), static_cast<int32_t>(id->get<int64_t>()));
        }
    }
    try {
        return from_ranks(std::move(bytes), std::move(specials));
    } catch (const TokenizerError& e) {
        throw TokenizerError(where + ": " + e.what());
    }
}

std::vector<std::pair<std::string, int32_t>> Tokenizer::meta_specials(int32_t first_id, MetaSpecials names) {
    // As Meta's tokenizer code lists them: a few named tokens, then reserved ones up to 256 in all.
    constexpr int kTotal = 256;
    std::vector<std::string> list;
    int next_reserved = 0;
    if (names == MetaSpecials::Llama3) {
        list = {"<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
                "<|reserved_special_token_2|>", "<|reserved_special_token_3|>", "<|start_header_id|>",
                "<|end_header_id|>", "<|reserved_special_token_4|>", "<|eot_id|>"};
        next_reserved = 5;
    } else {
        list = {"<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
                "<|finetune_right_pad_id|>", "<|step_id|>", "<|start_header_id|>", "<|end_header_id|>",
                "<|eom_id|>", "<|eot_id|>", "<|python_tag|>"};
        next_reserved = 2;
    }
    while (static_cast<int>(list.size()) < kTotal)
        list.push_back("<|reserved_special_token_" + std::to_string(next_reserved++) + "|>");
    std::vector<std::pair<std::string, int32_t>> out;
    for (int i = 0; i < kTotal; ++i) out.emplace_back(list[static_cast<size_t>(i)], first_id + i);
    return out;
}

Tokenizer Tokenizer::from_tiktoken(const fs::path& file) { return from_tiktoken(file, MetaSpecials::Llama3); }

Tokenizer Tokenizer::from_tiktoken(const fs::path& file, MetaSpecials names) {
    return from_tiktoken_text(read_whole(file), file.string(), names);
}

Tokenizer Tokenizer::from_tiktoken_text(std::string_view text, const std::string& origin, MetaSpecials names) {
    // Ranks must run 0..N-1 over the N lines (gaps are refused below); knowing N first keeps a lying rank from
    // making us allocate for it.
    int64_t max_rank = 0;
    for (size_t p = 0; p < text.size();) {
        size_t nl = text.find('\n', p);
        size_t end = nl == std::string_view::npos ? text.size() : nl;
        if (end > p && !(end == p + 1 && text[p] == '\r')) ++max_rank;
        p = end + 1;
    }
    std::vector<std::string> bytes;
    std::vector<int64_t> line_of;  // by rank, for "already used on line N"
    tokenizer_detail::RankMap seen;
    size_t pos = 0, line_no = 0;
    int64_t count = 0;
    while (pos < text.size()) {
        size_t nl = text.find('\n', pos);
        std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
        pos = nl == std::string_view::npos ? text.size() : nl + 1;
        ++line_no;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.empty()) continue;  // tiktoken skips empty lines too
        const std::string at = origin + ":" + std::to_string(line_no) + ": ";
        size_t sp = line.find(' ');
        if (sp == std::string_view::npos || line.find(' ', sp + 1) != std::string_view::npos)
            throw TokenizerError(at + "expected \"BASE64 RANK\", found \"" + shorten(line) + "\"");
        auto b = base64_decode(line.substr(0, sp));
        if (!b || b->empty()) throw TokenizerError(at + "\"" + shorten(line.substr(0, sp)) + "\" is not valid base64 of a token");
        auto rank = parse_rank(line.substr(sp + 1));
        if (!rank) throw TokenizerError(at + "rank \"" + shorten(line.substr(sp + 1)) + "\" is not a non-negative integer");
        if (*rank >= max_rank)
            throw TokenizerError(at + "rank " + std::to_string(*rank) + " is out of range: " + std::to_string(max_rank) +
                                 " lines give ranks 0.." + std::to_string(max_rank - 1));
        const auto r = static_cast<size_t>(*rank);
        if (r >= bytes.size()) {
            bytes.resize(r + 1);
            line_of.resize(r + 1, 0);
        }
        if (!bytes[r].empty())
            throw TokenizerError(at + "rank " + std::to_string(r) + " is already used on line " + std::to_string(line_of[r]));
        if (auto [it, inserted] = seen.emplace(*b, static_cast<int32_t>(r)); !inserted)
            throw TokenizerError(at + "these bytes already have rank " + std::to_string(it->second) + " (line " +
                                 std::to_string(line_of[static_cast<size_t>(it->second)]) + ")");
        bytes[r] = std::move(*b);
        line_of[r] = static_cast<int64_t>(line_no);
        ++count;
    }
    if (count == 0) throw TokenizerError(origin + ": no tokens (expected lines of \"BASE64 RANK\")");
    for (size_t r = 0; r < bytes.size(); ++r)
        if (bytes[r].empty())
            throw TokenizerError(origin + ": rank " + std::to_string(r) + " is missing (ranks must run 0.." +
                                 std::to_string(bytes.size() - 1) + " without gaps)");
    const auto first_special = static_cast<int32_t>(bytes.size());
    try {
        return from_ranks(std::move(bytes), meta_specials(first_special, names));
    } catch (const TokenizerError& e) {
        throw TokenizerError(origin + ": " + e.what());
    }
}

Tokenizer Tokenizer::from_gguf_vocab(const std::vector<std::string>& tokens, const std::vector<int32_t>& token_types,
                                     const std::vector<std::string>& merges) {
    const std::string where = "GGUF tokenizer";
    if (tokens.empty()) throw TokenizerError(where + ": tokenizer.ggml.tokens is empty");
    if (token_types.size() != tokens.size())
        throw TokenizerError(where + ": tokenizer.ggml.token_type has " + std::to_string(token_types.size()) +
                             " entries, expected one per token (" + std::to_string(tokens.size()) + ")");
    std::vector<std::string> bytes(tokens.size());
    std::vector<std::pair<std::string, int32_t>> specials;
    for (size_t i = 0; i < tokens.size(); ++i) {
        const int32_t t = token_types[i];
        const std::string at = where + ": token " + std::to_string(i) + " \"" + shorten(tokens[i]) + "\"";
        // llama.cpp's types: 1 normal, 2 unknown, 3 control, 4 user defined, 5 unused, 6 byte.
        if (t == 3 || t == 4) {
            specials.emplace_back(tokens[i], static_cast<int32_t>(i));
        } else if (t == 1 || t == 2 || t == 5 || t == 6) {
            auto b = gpt2_unicode_to_bytes(tokens[i]);
            if (!b || b->empty()) throw TokenizerError(at + " (type " + std::to_string(t) + ") is not in GPT-2 byte-to-unicode form");
            bytes[i] = std::move(*b);
        } else {
            throw TokenizerError(at + " has token type " + std::to_string(t) + ", expected 1..6");
        }
    }
    Tokenizer tok;
    try {
        tok = from_ranks(std::move(bytes), std::move(specials));
    } catch (const TokenizerError& e) {
        throw TokenizerError(where + ": " + e.what());
    }
    // Merges are implied by the ranks (id = rank: tiktoken merges the adjacent pair whose concatenation has the
    // lowest rank), so they are not used. But a file whose merges name bytes that are not tokens does not
    // describe this vocabulary, so each must join two tokens into a token. (Their order is not checked: in
    // Llama 3 a token can rank before one of the tokens a merge makes it from, e.g. four spaces, 257, from one
    // space and three spaces, 262.)
    const auto& ranks = tok.impl_->ranks;
    for (size_t i = 0; i < merges.size(); ++i) {
        const std::string& m = merges[i];
        const std::string at = where + ": merge " + std::to_string(i) + " \"" + shorten(m) + "\"";
        size_t sp = m.find(' ');
        if (sp == std::string::npos || sp == 0 || sp + 1 == m.size() || m.find(' ', sp + 1) != std::string::npos)
            throw TokenizerError(at + " is not two tokens separated by one space");
        auto a = gpt2_unicode_to_bytes(std::string_view(m).substr(0, sp));
        auto b = gpt2_unicode_to_bytes(std::string_view(m).substr(sp + 1));
        if (!a || !b) throw TokenizerError(at + " is not in GPT-2 byte-to-unicode form");
        if (!ranks.contains(*a) || !ranks.contains(*b)) throw TokenizerError(at + " joins a part that is not a token");
        if (!ranks.contains(*a + *b)) throw TokenizerError(at + " makes bytes that are not a token");
    }
    return tok;
}

Tokenizer load_tokenizer_for(const fs::path& path) {
    std::error_code ec;
    if (!fs::exists(path, ec)) throw TokenizerError("no tokenizer at " + path.string() + ": the path does not exist");
    if (!fs::is_directory(path, ec)) {
        if (path.extension() == ".gguf")
            throw TokenizerError(path.string() + " is a GGUF file: its tokenizer is read with the model (load_model)");
        if (path.extension() == ".json") return Tokenizer::from_hf_json(path);
        return Tokenizer::from_tiktoken(path);
    }
    if (fs::is_regular_file(path / "tokenizer.json", ec)) return Tokenizer::from_hf_json(path / "tokenizer.json");
    if (fs::is_regular_file(path / "tokenizer.model", ec)) {
        MetaSpecials names = MetaSpecials::Llama3;
        // Meta's Llama 3.1 and 3.2 folders say use_scaled_rope in params.json; their tokenizer code names the
        // specials differently. A params.json that does not parse is the checkpoint loader's to report.
        if (fs::is_regular_file(path / "params.json", ec)) {
            try {
                const auto p = untrusted_json::parse<FormatError>(read_whole(path / "params.json"), "params.json");
                if (p.is_object() && p.value("use_scaled_rope", false) == true) names = MetaSpecials::Llama31;
            } catch (const Error&) {
            }
        }
        return Tokenizer::from_tiktoken(path / "tokenizer.model", names);
    }
    throw TokenizerError("no tokenizer in " + path.string() + ": looked for tokenizer.json and tokenizer.model");
}

}  // namespace strata
