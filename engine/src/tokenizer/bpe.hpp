#pragma once
// Byte-pair merging as tiktoken does it: ranks are the token ids, and the pair to merge next is the adjacent
// pair whose concatenation has the lowest rank (the leftmost one on a tie).
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "tokenizer/rank_table.hpp"
#include <vector>

namespace strata::tokenizer_detail {

// For the maps that are only used while building (special texts, duplicate checks): string_view lookups.
struct BytesHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept;
};
using RankMap = std::unordered_map<std::string, int32_t, BytesHash, std::equal_to<>>;

// Appends the tokens of `piece` to `out`. Every single byte must have a rank (the caller's tokenizer checks
// that when it is built). Quadratic scanning for short pieces, a heap for long ones (10k spaces, a long run of
// one letter), with identical results.
void bpe_encode(std::string_view piece, const RankTable& ranks, std::vector<int32_t>& out);

}  // namespace strata::tokenizer_detail
