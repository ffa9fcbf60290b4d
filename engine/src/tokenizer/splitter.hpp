#pragma once
// The Llama 3 pre-tokenizer: splits text into the pieces BPE then works on, with PCRE2 (Unicode properties).
#include <cstddef>
#include <string_view>

namespace strata::tokenizer_detail {

// The split pattern of Meta's llama/tokenizer.py and tokenizer.json's pre_tokenizer, byte for byte.
inline constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Compiled once per process (JIT when PCRE2 has it) and shared; matching is thread-safe.
class Splitter {
public:
    static const Splitter& llama3();

    // Calls on_piece(std::string_view) for each piece of `text`, in order; the pieces tile the text exactly.
    // `text` must be valid UTF-8 (the caller checks: this skips PCRE2's own check for speed).
    template <class F>
    void split(std::string_view text, F&& on_piece) const {
        Matcher m(*this, text);
        std::string_view piece;
        while (m.next(piece)) on_piece(piece);
    }

    bool jit() const { return jit_; }

    Splitter(const Splitter&) = delete;
    Splitter& operator=(const Splitter&) = delete;

private:
    Splitter();
    ~Splitter();

    // One pass over one text; owns the PCRE2 match data.
    class Matcher {
    public:
        Matcher(const Splitter& s, std::string_view text);
        ~Matcher();
        Matcher(const Matcher&) = delete;
        Matcher& operator=(const Matcher&) = delete;
        bool next(std::string_view& piece);

    private:
        const Splitter& s_;
        std::string_view text_;
        size_t pos_ = 0;
        size_t pending_end_ = 0;  // end of a match found after an unmatched gap, handed out next
        void* md_ = nullptr;      // pcre2_match_data_8*
    };

    void* code_ = nullptr;  // pcre2_code_8*
    bool jit_ = false;
};

}  // namespace strata::tokenizer_detail
