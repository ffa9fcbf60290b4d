#include "worker/token_text.hpp"

#include "strata/tokenizer.hpp"

namespace strata::ui {

namespace {
// Length of the UTF-8 sequence starting at s[i] when it is complete and well formed, else 0.
size_t utf8Length(std::string_view s, size_t i) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return 0;
    for (size_t k = 1; k < n; ++k)
        if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return 0;
    return n;
}
}  // namespace

QString displayBytes(std::string_view bytes) {
    QString out;
    for (size_t i = 0; i < bytes.size();) {
        const size_t n = utf8Length(bytes, i);
        if (n == 0) {
            out += QStringLiteral("<0x%1>").arg(static_cast<unsigned char>(bytes[i]), 2, 16, QLatin1Char('0')).toUpper().replace("0X", "0x");
            ++i;
            continue;
        }
        const QString ch = QString::fromUtf8(bytes.data() + i, qsizetype(n));
        if (ch == " ")
            out += QChar(0x2423);  // ␣
        else if (ch == "\n")
            out += QChar(0x21B5);  // ↵
        else if (ch == "\t")
            out += QChar(0x21E5);  // ⇥
        else if (ch == "\r")
            out += "\\r";
        else
            out += ch;
        i += n;
    }
    return out;
}

QString displayToken(const Tokenizer& tokenizer, int32_t id) {
    try {
        return displayBytes(tokenizer.token_bytes(id));
    } catch (const std::exception&) {
        return QStringLiteral("<%1>").arg(id);
    }
}

}  // namespace strata::ui
