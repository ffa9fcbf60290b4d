// UTF-8 as RFC 3629 defines it: no overlong forms, no surrogates, nothing above U+10FFFF. These are exactly the
// sequences PCRE2 accepts in UTF mode, so text that passes here can be matched with PCRE2_NO_UTF_CHECK.
#include "tokenizer/utf8.hpp"

#include <cstdio>

#include "strata/tokenizer.hpp"

namespace strata {
namespace tokenizer_detail {

int utf8_sequence_length(std::string_view s, size_t i) {
    const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char c = b(i);
    if (c < 0x80) return 1;
    int len = 0;
    // The range the second byte may take: narrower than 0x80..0xBF where it rules out overlong forms,
    // surrogates (0xED 0xA0..) and code points above U+10FFFF (0xF4 0x90..).
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        return 0;
    }
    for (int k = 1; k < len; ++k) {
        if (i + k >= s.size()) return -1;
        const unsigned char x = b(i + k);
        const unsigned char klo = k == 1 ? lo : 0x80, khi = k == 1 ? hi : 0xBF;
        if (x < klo || x > khi) return 0;
    }
    return len;
}

size_t first_invalid_utf8(std::string_view s) {
    size_t i = 0;
    while (i < s.size()) {
        if (static_cast<unsigned char>(s[i]) < 0x80) {
            ++i;
            continue;
        }
        int n = utf8_sequence_length(s, i);
        if (n <= 0) return i;
        i += static_cast<size_t>(n);
    }
    return std::string_view::npos;
}

std::string describe_bytes(std::string_view s, size_t offset, size_t max_bytes) {
    std::string out;
    for (size_t k = offset; k < s.size() && k < offset + max_bytes; ++k) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "%s0x%02X", out.empty() ? "" : " ", static_cast<unsigned char>(s[k]));
        out += buf;
    }
    return out;
}

}  // namespace tokenizer_detail

std::string to_valid_utf8(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size());
    size_t i = 0;
    while (i < bytes.size()) {
        int n = tokenizer_detail::utf8_sequence_length(bytes, i);
        if (n > 0) {
            out.append(bytes.substr(i, static_cast<size_t>(n)));
            i += static_cast<size_t>(n);
            continue;
        }
        // One U+FFFD per maximal invalid subpart (the Unicode "substitution of maximal subparts" practice):
        // skip the lead byte and any continuation bytes that a valid sequence could have used.
        out += "\xEF\xBF\xBD";
        size_t j = bytes.size();
        if (n == 0) {
            // The longest m for which bytes[i, i+m) is still a valid but incomplete start of a character.
            j = i + 1;
            for (size_t m = 2; m <= 3 && i + m <= bytes.size(); ++m)
                if (tokenizer_detail::utf8_sequence_length(bytes.substr(0, i + m), i) == -1) j = i + m;
        }
        i = j;
    }
    return out;
}

}  // namespace strata
