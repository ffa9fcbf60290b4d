#pragma once
// Bytes -> rank for the whole vocabulary, the lookup BPE does several times per piece. An open-addressing table
// over one byte arena: a lookup touches one slot (16 bytes, mostly a single cache line) and the token's bytes,
// where std::unordered_map chases a bucket, a node and a string. Built once, then read-only and thread-safe.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::tokenizer_detail {

uint64_t hash_bytes(std::string_view s) noexcept;

class RankTable {
public:
    static constexpr int32_t kNone = -1;

    // Adds bytes with their rank; returns the rank these bytes already had (and adds nothing), or kNone.
    int32_t insert(std::string_view bytes, int32_t rank);
    int32_t find(std::string_view bytes) const noexcept;
    bool contains(std::string_view bytes) const noexcept { return find(bytes) != kNone; }
    size_t size() const { return count_; }
    void reserve(size_t n);

private:
    struct Slot {
        uint32_t tag = 0;       // high half of the hash: most mismatches end here
        uint32_t len = 0;
        uint32_t offset = 0;    // into arena_
        int32_t rank = kNone;   // kNone: empty slot
    };
    void grow(size_t slots);
    std::vector<Slot> slots_;
    std::string arena_;
    size_t count_ = 0;
    size_t mask_ = 0;
};

}  // namespace strata::tokenizer_detail
