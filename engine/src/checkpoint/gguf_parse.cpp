// Reading a GGUF image: every count and length is checked against the bytes that remain before anything is
// allocated, so a lying header costs an error message, not memory.
#include <algorithm>
#include <bit>
#include <cstring>
#include <numeric>
#include <unordered_set>

#include "strata/error.hpp"
#include "strata/gguf.hpp"

namespace strata::gguf {

namespace {

// Nested arrays are legal GGUF but no model uses more than one level; the limit keeps recursion shallow.
constexpr int kMaxArrayDepth = 4;
// ggml's GGML_MAX_DIMS.
constexpr uint32_t kMaxDims = 4;
// Counts are checked against the bytes left, but a multi-gigabyte file leaves room for absurd ones whose
// containers (tens of bytes per element) would not fit in memory: reserve at most this much up front and let real
// elements, each read from the file, grow the rest. Arrays beyond kMaxArray elements (a Llama 3 vocabulary has
// 128256 tokens and 280147 merges) are refused outright.
constexpr uint64_t kMaxReserve = 1 << 16;
constexpr uint64_t kMaxArray = uint64_t(1) << 26;

class Cursor {
public:
    Cursor(std::span<const std::byte> bytes, const std::string& file) : bytes_(bytes), file_(file) {}

    uint64_t pos() const { return pos_; }
    uint64_t left() const { return bytes_.size() - pos_; }

    [[noreturn]] void fail(const std::string& what, uint64_t at) const {
        throw FormatError(file_ + ": " + what + " (at byte offset " + std::to_string(at) + " of " +
                          std::to_string(bytes_.size()) + ")");
    }

    void need(uint64_t n, const char* what) const {
        if (n > left())
            fail(std::string("truncated GGUF: ") + what + " needs " + std::to_string(n) + " bytes but only " +
                     std::to_string(left()) + " remain",
                 pos_);
    }

    template <typename T>
    T read(const char* what) {
        need(sizeof(T), what);
        T v;
        std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }

    std::string read_string(const char* what) {
        const uint64_t at = pos_;
        const uint64_t n = read<uint64_t>(what);
        if (n > left())
            fail(std::string(what) + ": string length " + std::to_string(n) + " is larger than the " +
                     std::to_string(left()) + " bytes left in the file",
                 at);
        std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), static_cast<size_t>(n));
        pos_ += n;
        return s;
    }

private:
    std::span<const std::byte> bytes_;
    const std::string& file_;
    uint64_t pos_ = 0;
};

// The fewest bytes one element of a type can take: bounds counts before allocating.
uint64_t min_size(ValueType t) {
    switch (t) {
        case ValueType::Uint8:
        case ValueType::Int8:
        case ValueType::Bool: return 1;
        case ValueType::Uint16:
        case ValueType::Int16: return 2;
        case ValueType::Uint32:
        case ValueType::Int32:
        case ValueType::Float32: return 4;
        case ValueType::Uint64:
        case ValueType::Int64:
        case ValueType::Float64:
        case ValueType::String: return 8;  // the length, for an empty string
        case ValueType::Array: return 12;  // element type + count, for an empty array
    }
    return 1;
}

bool known_value_type(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::Float64); }

// Reads one scalar of type t into the matching field of v, or appends it to the array fields when `into_array`.
void read_scalar(Cursor& c, ValueType t, Value& v, bool into_array, const std::string& key) {
    const char* what = "metadata value";
    uint64_t u = 0;
    int64_t i = 0;
    double f = 0;
    enum { U, I, F, S } kind = U;
    switch (t) {
        case ValueType::Uint8: u = c.read<uint8_t>(what); break;
        case ValueType::Uint16: u = c.read<uint16_t>(what); break;
        case ValueType::Uint32: u = c.read<uint32_t>(what); break;
        case ValueType::Uint64: u = c.read<uint64_t>(what); break;
        case ValueType::Int8: i = c.read<int8_t>(what), kind = I; break;
        case ValueType::Int16: i = c.read<int16_t>(what), kind = I; break;
        case ValueType::Int32: i = c.read<int32_t>(what), kind = I; break;
        case ValueType::Int64: i = c.read<int64_t>(what), kind = I; break;
        case ValueType::Float32: f = c.read<float>(what), kind = F; break;
        case ValueType::Float64: f = c.read<double>(what), kind = F; break;
        case ValueType::Bool: {
            const uint64_t at = c.pos();
            u = c.read<uint8_t>(what);
            if (u > 1) c.fail("metadata " + key + ": bool value " + std::to_string(u) + " is neither 0 nor 1", at);
            break;
        }
        case ValueType::String: kind = S; break;
        case ValueType::Array: break;  // handled by the caller
    }
    if (kind == S) {
        std::string s = c.read_string(("metadata " + key).c_str());
        if (into_array) v.strings.push_back(std::move(s));
        else v.str = std::move(s);
        return;
    }
    if (!into_array) {
        v.u = u, v.i = i, v.f = f;
        return;
    }
    // Integers of every width (and bools) share `ints`; a uint64 above INT64_MAX keeps its bits.
    if (kind == F) v.floats.push_back(f);
    else if (kind == I) v.ints.push_back(i);
    else v.ints.push_back(std::bit_cast<int64_t>(u));
}

Value read_value(Cursor& c, uint32_t raw_type, const std::string& key, int depth, uint64_t type_at) {
    if (!known_value_type(raw_type))
        c.fail("metadata " + key + ": unknown value type " + std::to_string(raw_type), type_at);
    Value v;
    v.type = static_cast<ValueType>(raw_type);
    if (v.type != ValueType::Array) {
        read_scalar(c, v.type, v, false, key);
        return v;
    }
    if (depth >= kMaxArrayDepth) c.fail("metadata " + key + ": arrays nested deeper than 4", type_at);
    const uint64_t elem_at = c.pos();
    const uint32_t raw_elem = c.read<uint32_t>("array element type");
    if (!known_value_type(raw_elem))
        c.fail("metadata " + key + ": unknown array element type " + std::to_string(raw_elem), elem_at);
    v.elem = static_cast<ValueType>(raw_elem);
    const uint64_t count_at = c.pos();
    const uint64_t n = c.read<uint64_t>("array length");
    if (n > c.left() / min_size(v.elem))
        c.fail("metadata " + key + ": array of " + std::to_string(n) + " " +
                   std::string(value_type_name(v.elem)) + " cannot fit in the " + std::to_string(c.left()) +
                   " bytes left",
               count_at);
    if (n > kMaxArray)
        c.fail("metadata " + key + ": array of " + std::to_string(n) + " elements is beyond any model's (at most " +
                   std::to_string(kMaxArray) + ")",
               count_at);
    const uint64_t reserve = std::min(n, kMaxReserve);
    switch (v.elem) {
        case ValueType::String: v.strings.reserve(reserve); break;
        case ValueType::Float32:
        case ValueType::Float64: v.floats.reserve(reserve); break;
        case ValueType::Array: v.items.reserve(reserve); break;
        default: v.ints.reserve(reserve); break;
    }
    for (uint64_t k = 0; k < n; ++k) {
        if (v.elem == ValueType::Array) {
            v.items.push_back(read_value(c, raw_elem, key, depth + 1, elem_at));
        } else {
            read_scalar(c, v.elem, v, true, key);
        }
    }
    return v;
}

}  // namespace

File parse(std::span<const std::byte> bytes, const std::string& file_name) {
    Cursor c(bytes, file_name);
    File f;
    const uint32_t magic = c.read<uint32_t>("header");
    if (magic != kMagic) {
        char shown[5] = {};
        std::memcpy(shown, &magic, 4);
        for (char& ch : shown)
            if (ch != 0 && (ch < 32 || ch > 126)) ch = '?';
        c.fail("not a GGUF file: magic is \"" + std::string(shown, 4) + "\", expected \"GGUF\"", 0);
    }
    f.version = c.read<uint32_t>("header");
    if (f.version != 2 && f.version != 3) {
        std::string hint;
        if (f.version == 1) hint = " (GGUF v1 used 32-bit counts and is obsolete: convert the file again)";
        else if (f.version == 0x02000000u || f.version == 0x03000000u) hint = " (a big-endian GGUF?)";
        c.fail("unsupported GGUF version " + std::to_string(f.version) + ", expected 2 or 3" + hint, 4);
    }
    const uint64_t n_tensors = c.read<uint64_t>("header");
    const uint64_t n_kv = c.read<uint64_t>("header");
    // A tensor info takes at least 24 bytes (name length, n_dims, type, offset); a metadata pair at least 13.
    if (n_tensors > c.left() / 24)
        c.fail("tensor count " + std::to_string(n_tensors) + " is absurd: " + std::to_string(c.left()) +
                   " bytes remain and each tensor info takes at least 24",
               8);
    if (n_kv > c.left() / 13)
        c.fail("metadata count " + std::to_string(n_kv) + " is absurd: " + std::to_string(c.left()) +
                   " bytes remain and each key/value takes at least 13",
               16);

    std::unordered_set<std::string> keys;
    f.metadata.reserve(std::min(n_kv, kMaxReserve));
    for (uint64_t k = 0; k < n_kv; ++k) {
        const uint64_t key_at = c.pos();
        std::string key = c.read_string("metadata key");
        if (!keys.insert(key).second) c.fail("duplicate metadata key " + key, key_at);
        const uint64_t type_at = c.pos();
        const uint32_t raw_type = c.read<uint32_t>("metadata value type");
        Value v = read_value(c, raw_type, key, 0, type_at);
        f.metadata.emplace_back(std::move(key), std::move(v));
    }

    if (const Value* a = f.find("general.alignment")) {
        if (!a->is_integer() || a->u == 0 || !std::has_single_bit(a->u) || a->u > (uint64_t(1) << 30))
            c.fail("general.alignment must be a power of two (found " +
                       (a->is_integer() ? std::to_string(a->u) : std::string(value_type_name(a->type))) + ")",
                   0);
        f.alignment = a->u;
    }

    std::unordered_set<std::string> names;
    f.tensors.reserve(std::min(n_tensors, kMaxReserve));
    for (uint64_t k = 0; k < n_tensors; ++k) {
        const uint64_t info_at = c.pos();
        TensorInfo t;
        t.name = c.read_string("tensor name");
        if (!names.insert(t.name).second) c.fail("duplicate tensor " + t.name, info_at);
        const uint32_t n_dims = c.read<uint32_t>("tensor dims");
        if (n_dims == 0 || n_dims > kMaxDims)
            c.fail("tensor " + t.name + " has " + std::to_string(n_dims) + " dimensions (expected 1 to 4)", info_at);
        uint64_t numel = 1;
        for (uint32_t d = 0; d < n_dims; ++d) {
            const uint64_t n = c.read<uint64_t>("tensor dims");
            // 2^62 elements is far beyond any file; the bound keeps every later byte count free of overflow.
            if (n == 0 || n > (uint64_t(1) << 62) / numel)
                c.fail("tensor " + t.name + " dimension " + std::to_string(d) + " = " + std::to_string(n) +
                           " is zero or absurdly large",
                       info_at);
            numel *= n;
            t.ne.push_back(n);
        }
        const uint64_t type_at = c.pos();
        t.type = c.read<uint32_t>("tensor type");
        const TypeInfo* ti = type_info(t.type);
        if (!ti) c.fail("tensor " + t.name + " has unknown ggml type id " + std::to_string(t.type), type_at);
        if (t.ne[0] % static_cast<uint64_t>(ti->block_size) != 0)
            c.fail("tensor " + t.name + ": row length " + std::to_string(t.ne[0]) + " is not a multiple of the " +
                       std::string(ti->name) + " block size " + std::to_string(ti->block_size),
                   info_at);
        t.nbytes = numel / static_cast<uint64_t>(ti->block_size) * static_cast<uint64_t>(ti->block_bytes);
        const uint64_t off_at = c.pos();
        t.offset = c.read<uint64_t>("tensor offset");
        if (t.offset % f.alignment != 0)
            c.fail("tensor " + t.name + " offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                       std::to_string(f.alignment),
                   off_at);
        f.tensors.push_back(std::move(t));
    }

    f.data_offset = (c.pos() + f.alignment - 1) / f.alignment * f.alignment;
    const uint64_t size = bytes.size();
    for (TensorInfo& t : f.tensors) {
        if (t.offset > size || f.data_offset > size - t.offset || t.nbytes > size - f.data_offset - t.offset)
            throw FormatError(file_name + ": tensor " + t.name + " data [" + std::to_string(f.data_offset) + "+" +
                              std::to_string(t.offset) + ", +" + std::to_string(t.nbytes) +
                              " bytes) lies outside the file of " + std::to_string(size) + " bytes");
        t.file_offset = f.data_offset + t.offset;
    }
    std::vector<size_t> order(f.tensors.size());
    std::iota(order.begin(), order.end(), size_t(0));
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return f.tensors[a].offset < f.tensors[b].offset; });
    for (size_t k = 1; k < order.size(); ++k) {
        const TensorInfo& prev = f.tensors[order[k - 1]];
        const TensorInfo& next = f.tensors[order[k]];
        if (prev.offset + prev.nbytes > next.offset)
            throw FormatError(file_name + ": tensors " + prev.name + " [" + std::to_string(prev.file_offset) + ", +" +
                              std::to_string(prev.nbytes) + ") and " + next.name + " [" +
                              std::to_string(next.file_offset) + ", +" + std::to_string(next.nbytes) + ") overlap");
    }
    return f;
}

}  // namespace strata::gguf
