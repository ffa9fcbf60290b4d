#include "tokenizer/bpe.hpp"

#include <cstring>
#include <limits>
#include <queue>

#include "strata/error.hpp"

namespace strata::tokenizer_detail {

namespace {

constexpr int32_t kNoRank = std::numeric_limits<int32_t>::max();

// The O(n^2) scan wins on short pieces; on random letters the two cost the same near 128 bytes and the heap is
// 1.7x faster at 512.
constexpr size_t kHeapThreshold = 128;

int32_t rank_of(const RankTable& ranks, std::string_view bytes) {
    int32_t r = ranks.find(bytes);
    return r == RankTable::kNone ? kNoRank : r;
}

int32_t byte_rank(const RankTable& ranks, std::string_view bytes) {
    int32_t r = rank_of(ranks, bytes);
    // The tokenizer checks at construction that all 256 bytes are tokens; this guards against a caller that
    // built a RankMap by hand.
    if (r == kNoRank) throw TokenizerError("byte-pair merging produced bytes that are not a token");
    return r;
}

// tiktoken's scan: parts are boundaries into the piece; rank[i] is the rank of merging part i with part i+1.
void bpe_scan(std::string_view piece, const RankTable& ranks, std::vector<int32_t>& out) {
    struct Part {
        uint32_t start;
        int32_t rank;
    };
    const size_t n = piece.size();
    std::vector<Part> parts(n + 1);
    for (size_t i = 0; i <= n; ++i) parts[i] = {static_cast<uint32_t>(i), kNoRank};
    for (size_t i = 0; i + 2 <= n; ++i) parts[i].rank = rank_of(ranks, piece.substr(i, 2));
    // The rank of merging parts[i] and parts[i+1], given the current boundaries.
    auto pair_rank = [&](size_t i) -> int32_t {
        if (i + 2 >= parts.size()) return kNoRank;
        return rank_of(ranks, piece.substr(parts[i].start, parts[i + 2].start - parts[i].start));
    };
    while (parts.size() > 2) {
        int32_t best = kNoRank;
        size_t at = 0;
        for (size_t i = 0; i + 1 < parts.size(); ++i)
            if (parts[i].rank < best) {
                best = parts[i].rank;
                at = i;
            }
        if (best == kNoRank) break;
        parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(at) + 1);
        parts[at].rank = pair_rank(at);
        if (at > 0) parts[at - 1].rank = pair_rank(at - 1);
    }
    for (size_t i = 0; i + 1 < parts.size(); ++i)
        out.push_back(byte_rank(ranks, piece.substr(parts[i].start, parts[i + 1].start - parts[i].start)));
}

// The same merges in O(n log n): parts form a linked list (a part is named by the byte where it starts), and a
// heap holds candidate pairs ordered by (rank, start). A pair goes stale when either side changes; `version`
// tells stale heap entries apart without removing them.
void bpe_heap(std::string_view piece, const RankTable& ranks, std::vector<int32_t>& out) {
    const uint32_t n = static_cast<uint32_t>(piece.size());
    std::vector<uint32_t> next(n), prev(n), version(n, 0);
    std::vector<uint8_t> alive(n, 1);
    for (uint32_t i = 0; i < n; ++i) {
        next[i] = i + 1;  // n means "no next part"
        prev[i] = i == 0 ? n : i - 1;
    }
    struct Candidate {
        int32_t rank;
        uint32_t start;
        uint32_t version;
        bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : start > o.start; }
    };
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
    auto end_of = [&](uint32_t part) { return next[part]; };  // a part ends where the next one starts
    auto push_pair = [&](uint32_t left) {
        uint32_t right = next[left];
        if (right >= n) return;
        int32_t r = rank_of(ranks, piece.substr(left, end_of(right) - left));
        if (r != kNoRank) heap.push({r, left, version[left]});
    };
    for (uint32_t i = 0; i + 1 < n; ++i) push_pair(i);
    while (!heap.empty()) {
        Candidate c = heap.top();
        heap.pop();
        if (!alive[c.start] || c.version != version[c.start]) continue;
        const uint32_t left = c.start, right = next[left];
        alive[right] = 0;
        next[left] = next[right];
        if (next[right] < n) prev[next[right]] = left;
        ++version[left];
        push_pair(left);
        if (prev[left] < n) {
            ++version[prev[left]];
            push_pair(prev[left]);
        }
    }
    for (uint32_t i = 0; i < n; i = next[i]) out.push_back(byte_rank(ranks, piece.substr(i, next[i] - i)));
}

}  // namespace

size_t BytesHash::operator()(std::string_view s) const noexcept { return static_cast<size_t>(hash_bytes(s)); }

void bpe_encode(std::string_view piece, const RankTable& ranks, std::vector<int32_t>& out) {
    if (piece.empty()) return;
    if (piece.size() > std::numeric_limits<uint32_t>::max() - 1)
        throw InputError("a single piece of " + std::to_string(piece.size()) + " bytes is too long to encode");
    if (piece.size() < kHeapThreshold) bpe_scan(piece, ranks, out);
    else bpe_heap(piece, ranks, out);
}

}  // namespace strata::tokenizer_detail
