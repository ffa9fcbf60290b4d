#include "tokenizer/rank_table.hpp"

#include <cstring>
#include <limits>

#include "strata/error.hpp"

namespace strata::tokenizer_detail {

namespace {

uint64_t mix(uint64_t x) {
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ull;
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ull;
    x ^= x >> 32;
    return x;
}

}  // namespace

uint64_t hash_bytes(std::string_view s) noexcept {
    uint64_t h = 0x9e3779b97f4a7c15ull * (s.size() + 1);
    const char* p = s.data();
    size_t n = s.size();
    while (n >= 8) {
        uint64_t k;
        std::memcpy(&k, p, 8);
        h = mix(h ^ k);
        p += 8;
        n -= 8;
    }
    uint64_t k = 0;
    std::memcpy(&k, p, n);
    return mix(h ^ k);
}

void RankTable::reserve(size_t n) {
    size_t want = 16;
    while (want < 2 * n) want *= 2;
    if (want > slots_.size()) grow(want);
}

void RankTable::grow(size_t slots) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(slots, Slot{});
    mask_ = slots - 1;
    for (const Slot& s : old) {
        if (s.rank == kNone) continue;
        size_t i = hash_bytes(std::string_view(arena_).substr(s.offset, s.len)) & mask_;
        while (slots_[i].rank != kNone) i = (i + 1) & mask_;
        slots_[i] = s;
    }
}

int32_t RankTable::find(std::string_view bytes) const noexcept {
    if (slots_.empty()) return kNone;
    const uint64_t h = hash_bytes(bytes);
    const auto tag = static_cast<uint32_t>(h >> 32);
    const auto len = static_cast<uint32_t>(bytes.size());
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
        const Slot& s = slots_[i];
        if (s.rank == kNone) return kNone;
        if (s.tag == tag && s.len == len && std::memcmp(arena_.data() + s.offset, bytes.data(), len) == 0) return s.rank;
    }
}

int32_t RankTable::insert(std::string_view bytes, int32_t rank) {
    if (rank < 0) throw TokenizerError("negative rank " + std::to_string(rank));
    if (arena_.size() + bytes.size() > std::numeric_limits<uint32_t>::max())
        throw TokenizerError("vocabulary bytes exceed 4 GiB");
    if (2 * (count_ + 1) > slots_.size()) grow(slots_.empty() ? 16 : 2 * slots_.size());
    const uint64_t h = hash_bytes(bytes);
    const auto tag = static_cast<uint32_t>(h >> 32);
    const auto len = static_cast<uint32_t>(bytes.size());
    size_t i = h & mask_;
    for (; slots_[i].rank != kNone; i = (i + 1) & mask_) {
        const Slot& s = slots_[i];
        if (s.tag == tag && s.len == len && std::memcmp(arena_.data() + s.offset, bytes.data(), len) == 0) return s.rank;
    }
    slots_[i] = Slot{tag, len, static_cast<uint32_t>(arena_.size()), rank};
    arena_.append(bytes);
    ++count_;
    return kNone;
}

}  // namespace strata::tokenizer_detail
