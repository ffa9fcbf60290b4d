// Streaming decode: a token can end inside a character (emoji and CJK are often split over two or three byte
// tokens), so bytes wait in `pending_` until they complete a character. Bytes that can never become valid
// UTF-8 are not held back forever: they come out as U+FFFD at once.
#include "strata/tokenizer.hpp"
#include "tokenizer/utf8.hpp"

namespace strata {

std::string StreamDecoder::push(int32_t id) {
    pending_ += tok_->token_bytes(id);
    std::string out;
    size_t i = 0;
    while (i < pending_.size()) {
        int n = tokenizer_detail::utf8_sequence_length(pending_, i);
        if (n < 0) break;  // an incomplete character at the end: wait for the next token
        if (n == 0) {
            // Leave the sanitising of the invalid part to to_valid_utf8 so both agree on how many U+FFFD.
            size_t j = i + 1;
            while (j < pending_.size() && tokenizer_detail::utf8_sequence_length(pending_, j) == 0 &&
                   (static_cast<unsigned char>(pending_[j]) & 0xC0) == 0x80)
                ++j;
            out += to_valid_utf8(std::string_view(pending_).substr(i, j - i));
            i = j;
            continue;
        }
        out.append(pending_, i, static_cast<size_t>(n));
        i += static_cast<size_t>(n);
    }
    pending_.erase(0, i);
    return out;
}

std::string StreamDecoder::flush() {
    std::string out = to_valid_utf8(pending_);
    pending_.clear();
    return out;
}

}  // namespace strata
