// PCRE2 in UTF mode with UCP, so \s, \p{L} and \p{N} mean what they mean in the regex engines tiktoken and
// Hugging Face use. Matches run over one segment of text at a time (the gaps between special tokens), because
// the pattern's (?!\S) looks ahead and tiktoken also matches each segment as its own subject.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/splitter.hpp"

#include <pcre2.h>

#include <algorithm>
#include <string>

#include "strata/error.hpp"
#include "tokenizer/utf8.hpp"

namespace strata::tokenizer_detail {

namespace {

std::string pcre2_message(int code) {
    PCRE2_UCHAR buf[256];
    int n = pcre2_get_error_message(code, buf, sizeof buf);
    if (n < 0) return "PCRE2 error " + std::to_string(code);
    return std::string(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

}  // namespace

const Splitter& Splitter::llama3() {
    static const Splitter s;
    return s;
}

Splitter::Splitter() {
    int err = 0;
    PCRE2_SIZE err_offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kLlama3Pattern.data()), kLlama3Pattern.size(),
                                     PCRE2_UTF | PCRE2_UCP, &err, &err_offset, nullptr);
    if (!code)
        throw TokenizerError("cannot compile the Llama 3 split pattern at offset " + std::to_string(err_offset) +
                             ": " + pcre2_message(err));
    code_ = code;
    // Without JIT (a PCRE2 built without it) the interpreter gives the same pieces, only slower.
    jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
}

Splitter::~Splitter() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

Splitter::Matcher::Matcher(const Splitter& s, std::string_view text) : s_(s), text_(text) {
    md_ = pcre2_match_data_create_from_pattern(static_cast<pcre2_code*>(s.code_), nullptr);
    if (!md_) throw std::bad_alloc();
}

Splitter::Matcher::~Matcher() { pcre2_match_data_free(static_cast<pcre2_match_data*>(md_)); }

bool Splitter::Matcher::next(std::string_view& piece) {
    if (pending_end_ > pos_) {
        piece = text_.substr(pos_, pending_end_ - pos_);
        pos_ = pending_end_;
        return true;
    }
    if (pos_ >= text_.size()) return false;
    auto* code = static_cast<pcre2_code*>(s_.code_);
    auto* md = static_cast<pcre2_match_data*>(md_);
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text_.data());
    int rc = s_.jit_ ? pcre2_jit_match(code, subject, text_.size(), pos_, 0, md, nullptr)
                     : pcre2_match(code, subject, text_.size(), pos_, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
        rc = pcre2_match(code, subject, text_.size(), pos_, PCRE2_NO_UTF_CHECK, md, nullptr);
    size_t start = text_.size(), end = text_.size();
    if (rc >= 0) {
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        start = ov[0];
        end = ov[1];
    } else if (rc != PCRE2_ERROR_NOMATCH) {
        throw InputError("cannot split the text at byte " + std::to_string(pos_) + ": " + pcre2_message(rc));
    }
    // Every character is a letter, number, space or other, so the pattern matches everywhere and never
    // matches empty. Should that ever fail, the skipped bytes still become a piece: text is never dropped.
    if (end <= start && start < text_.size())
        end = start + static_cast<size_t>(std::max(1, utf8_sequence_length(text_, start)));
    if (start > pos_) {
        piece = text_.substr(pos_, start - pos_);
        pos_ = start;
        pending_end_ = end;
        return true;
    }
    piece = text_.substr(start, end - start);
    pos_ = end;
    return true;
}

}  // namespace strata::tokenizer_detail
