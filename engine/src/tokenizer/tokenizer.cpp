// Encoding and decoding over a built vocabulary. Building it from files lives in sources.cpp.
#include <algorithm>
#include <string>

#include "strata/error.hpp"
#include "strata/tokenizer.hpp"
#include "tokenizer/splitter.hpp"
#include "tokenizer/tokenizer_impl.hpp"
#include "tokenizer/utf8.hpp"

namespace strata {

using tokenizer_detail::bpe_encode;
using tokenizer_detail::Splitter;

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

namespace {

std::string printable(std::string_view s, size_t max = 40) {
    std::string v = to_valid_utf8(s.substr(0, max));
    return s.size() > max ? v + "..." : v;
}

std::string hex_bytes(std::string_view s) {
    return tokenizer_detail::describe_bytes(s, 0, 8) + (s.size() > 8 ? " ..." : "");
}

}  // namespace

Tokenizer Tokenizer::from_ranks(std::vector<std::string> token_bytes,
                                std::vector<std::pair<std::string, int32_t>> specials) {
    auto impl = std::make_unique<Impl>();
    int64_t vocab = static_cast<int64_t>(token_bytes.size());
    for (const auto& [text, id] : specials) {
        if (id < 0) throw TokenizerError("special token '" + printable(text) + "' has a negative id " + std::to_string(id));
        vocab = std::max<int64_t>(vocab, int64_t{id} + 1);
    }
    if (vocab > (int64_t{1} << 30)) throw TokenizerError("vocabulary of " + std::to_string(vocab) + " ids is absurdly large");
    impl->bytes.resize(static_cast<size_t>(vocab));
    impl->special.assign(static_cast<size_t>(vocab), 0);
    impl->ranks.reserve(token_bytes.size());
    for (size_t id = 0; id < token_bytes.size(); ++id) {
        if (token_bytes[id].empty()) continue;  // a slot for a special token
        if (int32_t other = impl->ranks.insert(token_bytes[id], static_cast<int32_t>(id)); other >= 0)
            throw TokenizerError("token " + std::to_string(id) + " has the same bytes (" + hex_bytes(token_bytes[id]) +
                                 ") as token " + std::to_string(other) + ": ranks must be unique");
        impl->bytes[id] = std::move(token_bytes[id]);
    }
    std::sort(specials.begin(), specials.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    for (const auto& [text, id] : specials) {
        if (text.empty()) throw TokenizerError("special token " + std::to_string(id) + " has empty text");
        // Matching special text inside a character would leave invalid UTF-8 on both sides of it.
        if (size_t bad = tokenizer_detail::first_invalid_utf8(text); bad != std::string_view::npos)
            throw TokenizerError("special token " + std::to_string(id) + " is not valid UTF-8 at byte " +
                                 std::to_string(bad) + " (" + tokenizer_detail::describe_bytes(text, bad) + ")");
        if (impl->special[id])
            throw TokenizerError("two special tokens share id " + std::to_string(id) + ": '" + printable(impl->bytes[id]) +
                                 "' and '" + printable(text) + "'");
        if (!impl->bytes[id].empty())
            throw TokenizerError("special token '" + printable(text) + "' has id " + std::to_string(id) +
                                 ", which is already the normal token '" + printable(impl->bytes[id]) + "'");
        if (!impl->special_ids.emplace(text, id).second)
            throw TokenizerError("special token '" + printable(text) + "' appears twice (ids " +
                                 std::to_string(impl->special_ids.find(text)->second) + " and " + std::to_string(id) + ")");
        impl->bytes[id] = text;
        impl->special[id] = 1;
        impl->specials.emplace_back(text, id);
        impl->specials_by_first_byte[static_cast<unsigned char>(text[0])].push_back(id);
    }
    for (auto& ids : impl->specials_by_first_byte)
        std::stable_sort(ids.begin(), ids.end(),
                         [&](int32_t a, int32_t b) { return impl->bytes[a].size() > impl->bytes[b].size(); });
    for (int64_t id = 0; id < vocab; ++id)
        if (impl->bytes[id].empty())
            throw TokenizerError("token id " + std::to_string(id) + " has neither bytes nor a special token (vocabulary of " +
                                 std::to_string(vocab) + " ids)");
    // Byte-level BPE can only encode every text if every single byte is a token.
    for (int b = 0; b < 256; ++b) {
        const std::string one(1, static_cast<char>(b));
        if (!impl->ranks.contains(one))
            throw TokenizerError("byte " + tokenizer_detail::describe_bytes(one, 0) +
                                 " has no token: a byte-level vocabulary needs all 256 single bytes");
    }
    Tokenizer t;
    t.impl_ = std::move(impl);
    return t;
}

bool Tokenizer::empty() const { return !impl_; }

int32_t Tokenizer::vocab_size() const { return impl_ ? static_cast<int32_t>(impl_->bytes.size()) : 0; }

void Tokenizer::Impl::encode_ordinary(std::string_view text, std::vector<int32_t>& out) const {
    Splitter::llama3().split(text, [&](std::string_view piece) {
        // Llama 3 takes a piece that is itself a token whole, before any merging (tiktoken does; tokenizer.json
        // says so with ignore_merges). Most words end here.
        if (int32_t id = ranks.find(piece); id >= 0) out.push_back(id);
        else bpe_encode(piece, ranks, out);
    });
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool allow_special) const {
    if (!impl_) throw TokenizerError("cannot encode: no tokenizer is loaded");
    if (size_t bad = tokenizer_detail::first_invalid_utf8(text); bad != std::string_view::npos)
        throw InputError("cannot encode: the text is not valid UTF-8 at byte " + std::to_string(bad) + " of " +
                         std::to_string(text.size()) + " (" + tokenizer_detail::describe_bytes(text, bad) + ")");
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 1);
    if (!allow_special || impl_->specials.empty()) {
        impl_->encode_ordinary(text, out);
        return out;
    }
    // Split on special-token text first (leftmost, then longest), and encode the gaps as ordinary text.
    size_t gap = 0, pos = 0;
    while (pos < text.size()) {
        const auto& candidates = impl_->specials_by_first_byte[static_cast<unsigned char>(text[pos])];
        int32_t found = -1;
        for (int32_t id : candidates)
            if (text.substr(pos).starts_with(impl_->bytes[id])) {
                found = id;
                break;
            }
        if (found < 0) {
            ++pos;
            continue;
        }
        impl_->encode_ordinary(text.substr(gap, pos - gap), out);
        out.push_back(found);
        pos += impl_->bytes[found].size();
        gap = pos;
    }
    impl_->encode_ordinary(text.substr(gap), out);
    return out;
}

const std::string& Tokenizer::token_bytes(int32_t id) const {
    if (!impl_) throw TokenizerError("no tokenizer is loaded (token id " + std::to_string(id) + ")");
    if (id < 0 || id >= vocab_size())
        throw InputError("token id " + std::to_string(id) + " is out of range: the vocabulary has " +
                         std::to_string(vocab_size()) + " ids (0.." + std::to_string(vocab_size() - 1) + ")");
    return impl_->bytes[static_cast<size_t>(id)];
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
    std::string out;
    for (int32_t id : ids) out += token_bytes(id);
    return out;
}

std::optional<int32_t> Tokenizer::special_id(std::string_view text) const {
    if (!impl_) return std::nullopt;
    auto it = impl_->special_ids.find(text);
    if (it == impl_->special_ids.end()) return std::nullopt;
    return it->second;
}

bool Tokenizer::is_special(int32_t id) const {
    return impl_ && id >= 0 && id < vocab_size() && impl_->special[static_cast<size_t>(id)];
}

const std::vector<std::pair<std::string, int32_t>>& Tokenizer::specials() const {
    static const std::vector<std::pair<std::string, int32_t>> none;
    return impl_ ? impl_->specials : none;
}

std::string Tokenizer::token_gpt2_string(int32_t id) const {
    const std::string& b = token_bytes(id);
    return is_special(id) ? b : bytes_to_gpt2_unicode(b);
}

}  // namespace strata
