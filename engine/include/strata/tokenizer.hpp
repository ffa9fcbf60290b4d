#pragma once
// Llama 3's byte-level BPE, exactly as tiktoken does it: the Llama 3 split pattern (PCRE2, Unicode properties),
// merges by rank, and the 256 special tokens. Plain text never becomes a special token unless asked.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace strata {

// Which names Meta's tokenizer code gives the 256 special tokens after a tokenizer.model's ranks. The rank file
// is the same for both; only the names differ (Llama 3.1 renamed some reserved ones: 128008 <|eom_id|>,
// 128010 <|python_tag|>, ...). Llama 3's names equal the ones in Llama 3's tokenizer.json.
enum class MetaSpecials { Llama3, Llama31 };

class Tokenizer {
public:
    Tokenizer();
    ~Tokenizer();
    Tokenizer(Tokenizer&&) noexcept;
    Tokenizer& operator=(Tokenizer&&) noexcept;
    Tokenizer(const Tokenizer&) = delete;
    Tokenizer& operator=(const Tokenizer&) = delete;

    // Hugging Face tokenizer.json (vocab in GPT-2 byte-to-unicode form, merges, added_tokens).
    static Tokenizer from_hf_json(const std::filesystem::path& file);
    // The same from the file's text; `origin` names it in errors.
    static Tokenizer from_hf_json_text(std::string_view text, const std::string& origin);
    // Meta's tokenizer.model: tiktoken rank file (base64 bytes, rank), plus Meta's 256 special tokens.
    static Tokenizer from_tiktoken(const std::filesystem::path& file);
    static Tokenizer from_tiktoken(const std::filesystem::path& file, MetaSpecials names);
    // The same from the rank file's text; `origin` names it in errors.
    static Tokenizer from_tiktoken_text(std::string_view text, const std::string& origin,
                                        MetaSpecials names = MetaSpecials::Llama3);
    // The special tokens Meta's tokenizer code adds after `first_id` (128000 for Llama 3), in id order.
    static std::vector<std::pair<std::string, int32_t>> meta_specials(int32_t first_id, MetaSpecials names);
    // GGUF metadata: tokenizer.ggml.tokens (GPT-2 byte-to-unicode strings), token_type, merges.
    // token_types: 1 normal, 3 control, 4 user defined, ... (llama.cpp's values).
    static Tokenizer from_gguf_vocab(const std::vector<std::string>& tokens,
                                     const std::vector<int32_t>& token_types,
                                     const std::vector<std::string>& merges);
    // Ranks as raw bytes (id = index) and the special tokens (text, id).
    static Tokenizer from_ranks(std::vector<std::string> token_bytes,
                                std::vector<std::pair<std::string, int32_t>> specials);

    bool empty() const;
    int32_t vocab_size() const;  // normal + special tokens

    // Encode text. With allow_special, special-token text ("<|eot_id|>") becomes its id; otherwise it is text.
    // The text must be valid UTF-8 (as tiktoken's and Hugging Face's, which take Unicode strings): invalid
    // bytes throw InputError with their byte offset rather than being guessed at.
    std::vector<int32_t> encode(std::string_view text, bool allow_special = false) const;
    // The raw bytes of a token (special tokens: their text). Throws InputError for an id out of range.
    const std::string& token_bytes(int32_t id) const;
    // Decode ids to bytes (may contain invalid UTF-8 if the ids split a character).
    std::string decode(const std::vector<int32_t>& ids) const;
    // The id of a special token by text, or nullopt.
    std::optional<int32_t> special_id(std::string_view text) const;
    bool is_special(int32_t id) const;
    // Every (text, id) special token.
    const std::vector<std::pair<std::string, int32_t>>& specials() const;
    // Tokens in GPT-2 byte-to-unicode form (as tokenizer.json and GGUF store them), for writers.
    std::string token_gpt2_string(int32_t id) const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// Streams decoded text: bytes are held until they form complete UTF-8 characters.
class StreamDecoder {
public:
    explicit StreamDecoder(const Tokenizer& tok) : tok_(&tok) {}
    // Appends a token; returns the complete UTF-8 text now available (maybe empty).
    std::string push(int32_t id);
    // Whatever is left at the end; invalid trailing bytes become U+FFFD.
    std::string flush();

private:
    const Tokenizer* tok_;
    std::string pending_;
};

// The tokenizer for a model path: a folder with tokenizer.json (preferred) or tokenizer.model (Meta's; with a
// params.json that says use_scaled_rope, the Llama 3.1 special names), or such a file itself (.json means
// tokenizer.json, anything else a rank file). GGUF files carry their tokenizer inside: use load_model for them.
// TokenizerError names the folder and the files looked for when there is none.
Tokenizer load_tokenizer_for(const std::filesystem::path& path);

// The bytes with each invalid or incomplete UTF-8 sequence replaced by U+FFFD, for showing token pieces.
std::string to_valid_utf8(std::string_view bytes);

// GPT-2's byte-to-unicode table, used by tokenizer.json and GGUF vocabularies.
std::string bytes_to_gpt2_unicode(std::string_view bytes);
std::optional<std::string> gpt2_unicode_to_bytes(std::string_view text);

}  // namespace strata
