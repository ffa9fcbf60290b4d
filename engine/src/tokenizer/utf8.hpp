#pragma once
// UTF-8 checks shared by the encoder (which refuses invalid text), the stream decoder (which holds incomplete
// characters) and the writers of token pieces (which must show broken bytes somehow).
#include <cstddef>
#include <string>
#include <string_view>

namespace strata::tokenizer_detail {

// Length of the valid UTF-8 sequence starting at s[i] (1..4), 0 when the bytes there can never be valid
// (bad lead byte, bad continuation, overlong, surrogate, above U+10FFFF), or -1 when they are a valid but
// incomplete prefix cut off by the end of s.
int utf8_sequence_length(std::string_view s, size_t i);

// Offset of the first byte that is not part of valid UTF-8 (an incomplete tail counts as invalid), or npos.
size_t first_invalid_utf8(std::string_view s);

// Describes the bytes at the offset for an error message: "0xC3 0x28".
std::string describe_bytes(std::string_view s, size_t offset, size_t max_bytes = 4);

}  // namespace strata::tokenizer_detail
