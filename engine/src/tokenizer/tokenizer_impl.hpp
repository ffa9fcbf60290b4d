#pragma once
// The tokenizer's state, shared by the files that build it (sources.cpp) and use it (tokenizer.cpp).
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "strata/tokenizer.hpp"
#include "tokenizer/bpe.hpp"

namespace strata {

struct Tokenizer::Impl {
    std::vector<std::string> bytes;         // by id: a normal token's bytes, a special token's text
    std::vector<uint8_t> special;           // by id: 1 for special tokens
    tokenizer_detail::RankTable ranks;      // normal tokens' bytes -> id (= rank)
    std::vector<std::pair<std::string, int32_t>> specials;  // in id order
    tokenizer_detail::RankMap special_ids;  // special text -> id
    // Specials by their first byte, longest first, so the first that matches at a position is the longest.
    std::array<std::vector<int32_t>, 256> specials_by_first_byte;

    // Appends the tokens of text with no special tokens in it (already checked to be valid UTF-8).
    void encode_ordinary(std::string_view text, std::vector<int32_t>& out) const;
};

}  // namespace strata
