// The fast merge paths (a quadratic scan for short pieces, a heap for long ones) against the plainest possible
// reading of tiktoken's rule, on pieces long enough to take the heap path.
#include <map>
#include <random>

#include "catch.hpp"
#include "test_tokenizer_common.hpp"

using namespace strata;
using namespace strata::test;

namespace {

// Repeatedly merge the leftmost adjacent pair whose concatenation has the lowest rank, until none is a token.
std::vector<int32_t> naive_bpe(const std::string& piece, const std::map<std::string, int32_t>& ranks) {
    if (auto it = ranks.find(piece); it != ranks.end()) return {it->second};
    std::vector<std::string> parts;
    for (char c : piece) parts.emplace_back(1, c);
    for (;;) {
        int32_t best = INT32_MAX;
        size_t at = 0;
        for (size_t i = 0; i + 1 < parts.size(); ++i)
            if (auto it = ranks.find(parts[i] + parts[i + 1]); it != ranks.end() && it->second < best) {
                best = it->second;
                at = i;
            }
        if (best == INT32_MAX) break;
        parts[at] += parts[at + 1];
        parts.erase(parts.begin() + long(at) + 1);
    }
    std::vector<int32_t> out;
    for (auto& p : parts) out.push_back(ranks.at(p));
    return out;
}

}  // namespace

TEST_CASE("BPE merges match the plain rule on long single pieces", "[tokenizer]") {
    const auto& tok = llama3_tokenizer();
    std::map<std::string, int32_t> ranks;
    for (int32_t id = 0; id < tok.vocab_size(); ++id)
        if (!tok.is_special(id)) ranks[tok.token_bytes(id)] = id;

    std::mt19937 rng(1234);
    // Letters only, so the whole string is one \p{L}+ piece; few distinct letters, so merges compete and tie.
    const std::vector<std::string> alphabets = {"ab", "aeiou", "thsnr", "xyzq", "\xC3\xA9\xC3\xA8"};
    for (const auto& alpha : alphabets) {
        std::vector<std::string> chars;
        for (size_t i = 0; i < alpha.size();) {
            size_t n = (static_cast<unsigned char>(alpha[i]) >= 0xC0) ? 2 : 1;
            chars.push_back(alpha.substr(i, n));
            i += n;
        }
        for (size_t len : {5u, 40u, 127u, 128u, 129u, 300u, 2000u}) {
            std::string s;
            for (size_t i = 0; i < len; ++i) s += chars[rng() % chars.size()];
            INFO(alpha << " length " << len << ": " << s.substr(0, 80));
            CHECK(tok.encode(s) == naive_bpe(s, ranks));
        }
    }
    // Runs of one character: the case where every pair ties.
    for (size_t len : {2u, 17u, 128u, 500u, 3001u}) {
        for (const char* c : {"a", " ", "\xE4\xBD\xA0"}) {
            std::string s;
            for (size_t i = 0; i < len; ++i) s += c;
            INFO(c << " x " << len);
            CHECK(tok.encode(s) == naive_bpe(s, ranks));
        }
    }
}
