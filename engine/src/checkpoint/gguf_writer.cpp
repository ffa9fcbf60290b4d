// Writing a GGUF v3 file. Little-endian throughout (GGUF's default); tensor data is streamed from callbacks so
// a multi-gigabyte model never sits in memory twice.
#include <bit>
#include <cstring>
#include <fstream>

#include "strata/error.hpp"
#include "strata/gguf.hpp"

namespace strata::gguf {

namespace {

static_assert(std::endian::native == std::endian::little, "GGUF writing assumes a little-endian host");

template <typename T>
void put(std::ostream& os, T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    os.write(b, sizeof(T));
}

void put_string(std::ostream& os, const std::string& s) {
    put<uint64_t>(os, s.size());
    os.write(s.data(), static_cast<std::streamsize>(s.size()));
}

void put_int(std::ostream& os, ValueType t, uint64_t bits) {
    switch (t) {
        case ValueType::Uint8:
        case ValueType::Int8:
        case ValueType::Bool: put<uint8_t>(os, static_cast<uint8_t>(bits)); return;
        case ValueType::Uint16:
        case ValueType::Int16: put<uint16_t>(os, static_cast<uint16_t>(bits)); return;
        case ValueType::Uint32:
        case ValueType::Int32: put<uint32_t>(os, static_cast<uint32_t>(bits)); return;
        default: put<uint64_t>(os, bits); return;
    }
}

void put_float(std::ostream& os, ValueType t, double f) {
    if (t == ValueType::Float32) put<float>(os, static_cast<float>(f));
    else put<double>(os, f);
}

bool signed_type(ValueType t) {
    return t == ValueType::Int8 || t == ValueType::Int16 || t == ValueType::Int32 || t == ValueType::Int64;
}

void put_value_body(std::ostream& os, const Value& v) {
    switch (v.type) {
        case ValueType::String: put_string(os, v.str); return;
        case ValueType::Float32:
        case ValueType::Float64: put_float(os, v.type, v.f); return;
        case ValueType::Array: {
            put<uint32_t>(os, static_cast<uint32_t>(v.elem));
            put<uint64_t>(os, v.array_size());
            switch (v.elem) {
                case ValueType::String:
                    for (const std::string& s : v.strings) put_string(os, s);
                    return;
                case ValueType::Float32:
                case ValueType::Float64:
                    for (double f : v.floats) put_float(os, v.elem, f);
                    return;
                case ValueType::Array:
                    for (const Value& item : v.items) put_value_body(os, item);
                    return;
                default:
                    for (int64_t i : v.ints) put_int(os, v.elem, std::bit_cast<uint64_t>(i));
                    return;
            }
        }
        default:
            put_int(os, v.type, signed_type(v.type) ? std::bit_cast<uint64_t>(v.i) : v.u);
            return;
    }
}

void pad_to(std::ostream& os, uint64_t pos, uint64_t alignment) {
    static const char zeros[64] = {};
    uint64_t n = (alignment - pos % alignment) % alignment;
    while (n > 0) {
        const uint64_t k = n < sizeof zeros ? n : sizeof zeros;
        os.write(zeros, static_cast<std::streamsize>(k));
        n -= k;
    }
}

}  // namespace

Writer::Writer(uint64_t alignment) : alignment_(alignment) {
    if (alignment == 0 || !std::has_single_bit(alignment))
        throw Error("GGUF alignment must be a power of two, not " + std::to_string(alignment));
    if (alignment != kDefaultAlignment) set("general.alignment", Value::u32(static_cast<uint32_t>(alignment)));
}

void Writer::set(std::string key, Value v) {
    for (auto& [k, old] : metadata_)
        if (k == key) {
            old = std::move(v);
            return;
        }
    metadata_.emplace_back(std::move(key), std::move(v));
}

void Writer::add_tensor(std::string name, std::vector<uint64_t> ne, uint32_t type, uint64_t nbytes,
                        std::function<void(std::ostream&)> write_data) {
    tensors_.push_back(PendingTensor{std::move(name), std::move(ne), type, nbytes, std::move(write_data)});
}

void Writer::write(const std::filesystem::path& out) const {
    std::ofstream os(out, std::ios::binary | std::ios::trunc);
    if (!os) throw Error(out.string() + ": cannot open for writing");

    put<uint32_t>(os, kMagic);
    put<uint32_t>(os, 3);
    put<uint64_t>(os, tensors_.size());
    put<uint64_t>(os, metadata_.size());
    for (const auto& [key, v] : metadata_) {
        put_string(os, key);
        put<uint32_t>(os, static_cast<uint32_t>(v.type));
        put_value_body(os, v);
    }
    uint64_t offset = 0;  // relative to the data section
    for (const PendingTensor& t : tensors_) {
        put_string(os, t.name);
        put<uint32_t>(os, static_cast<uint32_t>(t.ne.size()));
        for (uint64_t n : t.ne) put<uint64_t>(os, n);
        put<uint32_t>(os, t.type);
        put<uint64_t>(os, offset);
        offset = (offset + t.nbytes + alignment_ - 1) / alignment_ * alignment_;
    }
    pad_to(os, static_cast<uint64_t>(os.tellp()), alignment_);
    const uint64_t data_start = static_cast<uint64_t>(os.tellp());
    for (const PendingTensor& t : tensors_) {
        const uint64_t before = static_cast<uint64_t>(os.tellp());
        t.write_data(os);
        const uint64_t written = static_cast<uint64_t>(os.tellp()) - before;
        if (!os) throw Error(out.string() + ": write failed in tensor " + t.name);
        if (written != t.nbytes)
            throw Error(out.string() + ": tensor " + t.name + " wrote " + std::to_string(written) +
                        " bytes, expected " + std::to_string(t.nbytes));
        pad_to(os, static_cast<uint64_t>(os.tellp()) - data_start, alignment_);
    }
    os.flush();
    if (!os) throw Error(out.string() + ": write failed (disk full?)");
}

}  // namespace strata::gguf
