// GPT-2's byte-to-unicode table. tokenizer.json and GGUF store byte-level tokens as text by giving every byte a
// printable code point: the printable Latin-1 bytes stand for themselves, the other 68 bytes (controls, space,
// DEL, NBSP, soft hyphen) take U+0100.. in byte order. So a space is "Ġ" (U+0120) and a newline "Ċ" (U+010A).
#include <array>
#include <cstdint>

#include "strata/tokenizer.hpp"

namespace strata {

namespace {

bool stands_for_itself(unsigned b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

struct Gpt2Table {
    std::array<uint16_t, 256> to_cp{};           // byte -> code point
    std::array<int16_t, 0x144> to_byte{};        // code point -> byte, -1 where none; all code points are < U+0144
    Gpt2Table() {
        to_byte.fill(-1);
        unsigned next = 0x100;
        for (unsigned b = 0; b < 256; ++b) {
            to_cp[b] = static_cast<uint16_t>(stands_for_itself(b) ? b : next++);
            to_byte[to_cp[b]] = static_cast<int16_t>(b);
        }
    }
};

const Gpt2Table& table() {
    static const Gpt2Table t;
    return t;
}

}  // namespace

std::string bytes_to_gpt2_unicode(std::string_view bytes) {
    const auto& t = table();
    std::string out;
    out.reserve(bytes.size() * 2);
    for (unsigned char c : bytes) {
        unsigned cp = t.to_cp[c];
        if (cp < 0x80) {
            out += static_cast<char>(cp);
        } else {
            out += static_cast<char>(0xC0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        }
    }
    return out;
}

std::optional<std::string> gpt2_unicode_to_bytes(std::string_view text) {
    const auto& t = table();
    std::string out;
    out.reserve(text.size());
    size_t i = 0;
    while (i < text.size()) {
        const unsigned char c = static_cast<unsigned char>(text[i]);
        unsigned cp;
        // Every code point in the table is below U+0800, so one- and two-byte UTF-8 forms are all we can meet.
        if (c < 0x80) {
            cp = c;
            i += 1;
        } else if (c >= 0xC2 && c <= 0xDF && i + 1 < text.size() &&
                   (static_cast<unsigned char>(text[i + 1]) & 0xC0) == 0x80) {
            cp = ((c & 0x1Fu) << 6) | (static_cast<unsigned char>(text[i + 1]) & 0x3Fu);
            i += 2;
        } else {
            return std::nullopt;
        }
        if (cp >= t.to_byte.size() || t.to_byte[cp] < 0) return std::nullopt;
        out += static_cast<char>(t.to_byte[cp]);
    }
    return out;
}

}  // namespace strata
