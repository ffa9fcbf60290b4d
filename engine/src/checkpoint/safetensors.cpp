#include "safetensors.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "strata/error.hpp"
#include "untrusted_json.hpp"

namespace strata::safetensors {

namespace {

using nlohmann::json;

// The reference implementation refuses headers above 100 MB; a real one is a few hundred KB even for 405B.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

std::string str(uint64_t x) { return std::to_string(x); }

std::string u128_str(unsigned __int128 x) {
    std::string out;
    do {
        out.insert(out.begin(), static_cast<char>('0' + static_cast<int>(x % 10)));
        x /= 10;
    } while (x != 0);
    return out;
}

std::string shape_str(const std::vector<int64_t>& s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
}

// The dtypes safetensors defines. Only the float types Llama checkpoints use are supported; the rest are
// named as unsupported rather than unknown so the message says what the file really holds.
const char* const kKnownUnsupported[] = {"F64", "I64", "U64", "I32", "U32", "I16", "U16", "I8", "U8",
                                         "BOOL", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2",
                                         "F4", "C64"};

DType parse_dtype(const json& j, const std::string& file, const std::string& name) {
    if (!j.is_string()) throw FormatError(file + ": tensor " + name + ": \"dtype\" is not a string");
    const std::string& s = j.get_ref<const std::string&>();
    if (s == "BF16") return DType::BF16;
    if (s == "F16") return DType::F16;
    if (s == "F32") return DType::F32;
    for (const char* k : kKnownUnsupported)
        if (s == k) throw UnsupportedError(file + ": tensor " + name + " has dtype " + s +
                                           ": not supported (Strata reads BF16, F16 and F32)");
    throw UnsupportedError(file + ": tensor " + name + " has unknown dtype '" + s + "' (expected BF16, F16 or F32)");
}

// An unsigned JSON integer, or a FormatError saying which field of which tensor is wrong.
uint64_t parse_uint(const json& j, const std::string& file, const std::string& name, const char* what) {
    if (!j.is_number_unsigned())
        throw FormatError(file + ": tensor " + name + ": " + what + " must be a non-negative integer, found " + untrusted_json::describe(j));
    return j.get<uint64_t>();
}

}  // namespace

Header parse(std::span<const std::byte> bytes, const std::string& file) {
    const uint64_t size = bytes.size();
    if (size < 8)
        throw FormatError(file + ": truncated: " + str(size) +
                          " bytes, but a safetensors file starts with an 8-byte header length");
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint64_t>(bytes[static_cast<size_t>(i)]);
    if (n > size - 8)
        throw FormatError(file + ": header length " + str(n) + " goes beyond the end of the file (" + str(size) +
                          " bytes, so at most " + str(size - 8) + " header bytes)");
    if (n > kMaxHeaderBytes)
        throw FormatError(file + ": header length " + str(n) + " is larger than the " + str(kMaxHeaderBytes) +
                          "-byte limit");
    if (n < 2) throw FormatError(file + ": header length " + str(n) + " is too small for a JSON object");

    Header h;
    h.data_start = 8 + n;
    const uint64_t data_size = size - h.data_start;

    const json root = untrusted_json::parse<FormatError>(
        std::string_view(reinterpret_cast<const char*>(bytes.data() + 8), n), file + ": the JSON header (bytes 8.." + str(8 + n) + ")");
    if (!root.is_object()) throw FormatError(file + ": the JSON header is not an object");

    for (const auto& [name, v] : root.items()) {
        if (name == "__metadata__") {
            if (!v.is_object()) throw FormatError(file + ": __metadata__ is not an object");
            for (const auto& [k, mv] : v.items()) {
                if (!mv.is_string()) throw FormatError(file + ": __metadata__." + k + " is not a string");
                h.metadata[k] = mv.get<std::string>();
            }
            continue;
        }
        if (!v.is_object()) throw FormatError(file + ": tensor " + name + ": entry is not an object");
        for (const char* key : {"dtype", "shape", "data_offsets"})
            if (!v.contains(key)) throw FormatError(file + ": tensor " + name + ": missing \"" + key + "\"");

        Entry e;
        e.name = name;
        e.dtype = parse_dtype(v["dtype"], file, name);

        const json& shape = v["shape"];
        if (!shape.is_array()) throw FormatError(file + ": tensor " + name + ": \"shape\" is not an array");
        if (shape.size() > 8) throw FormatError(file + ": tensor " + name + ": " + str(shape.size()) + " dimensions");
        // numel in 128 bits: a lying shape must not wrap around into a size that happens to match.
        unsigned __int128 numel = 1;
        for (const json& d : shape) {
            if (!d.is_number_unsigned())
                throw FormatError(file + ": tensor " + name + ": shape " + untrusted_json::describe(shape) +
                                  " has a dimension that is not a non-negative integer");
            const uint64_t x = d.get<uint64_t>();
            if (x > (uint64_t(1) << 40))
                throw FormatError(file + ": tensor " + name + ": shape " + untrusted_json::describe(shape) + " has an absurd dimension");
            numel *= x;
            if (numel > (static_cast<unsigned __int128>(1) << 62))
                throw FormatError(file + ": tensor " + name + ": shape " + untrusted_json::describe(shape) + " has too many elements");
            e.shape.push_back(static_cast<int64_t>(x));
        }

        const json& off = v["data_offsets"];
        if (!off.is_array() || off.size() != 2)
            throw FormatError(file + ": tensor " + name + ": \"data_offsets\" must be [begin, end], found " + untrusted_json::describe(off));
        const uint64_t begin = parse_uint(off[0], file, name, "data_offsets[0]");
        const uint64_t end = parse_uint(off[1], file, name, "data_offsets[1]");
        if (end < begin)
            throw FormatError(file + ": tensor " + name + ": data_offsets [" + str(begin) + ", " + str(end) +
                              "] end before begin");
        if (end > data_size)
            throw FormatError(file + ": tensor " + name + ": data_offsets [" + str(begin) + ", " + str(end) +
                              "] go beyond the data section (" + str(data_size) + " bytes after the " + str(n) +
                              "-byte header; file " + str(size) + " bytes)");
        // In 128 bits as well: 2^62 F32 elements are 2^64 bytes, which is 0 in 64 bits.
        const unsigned __int128 expected = numel * static_cast<unsigned __int128>(dtype_block_bytes(e.dtype));
        if (static_cast<unsigned __int128>(end - begin) != expected)
            throw FormatError(file + ": tensor " + name + ": " + std::string(dtype_name(e.dtype)) + " " +
                              shape_str(e.shape) + " needs " + u128_str(expected) + " bytes, but data_offsets [" +
                              str(begin) + ", " + str(end) + "] hold " + str(end - begin));
        e.offset = h.data_start + begin;
        e.nbytes = end - begin;
        h.tensors.push_back(std::move(e));
    }

    std::sort(h.tensors.begin(), h.tensors.end(),
              [](const Entry& a, const Entry& b) { return a.offset < b.offset || (a.offset == b.offset && a.nbytes < b.nbytes); });
    // Two tensors sharing bytes means the header lies about at least one of them.
    const Entry* prev = nullptr;
    for (const Entry& e : h.tensors) {
        if (e.nbytes == 0) continue;
        if (prev && e.offset < prev->offset + prev->nbytes)
            throw FormatError(file + ": tensors " + prev->name + " (bytes " + str(prev->offset - h.data_start) + ".." +
                              str(prev->offset - h.data_start + prev->nbytes) + ") and " + e.name + " (bytes " +
                              str(e.offset - h.data_start) + ".." + str(e.offset - h.data_start + e.nbytes) +
                              ") overlap");
        prev = &e;
    }
    return h;
}

void write(const std::string& file, const std::vector<WriteTensor>& tensors,
           const std::map<std::string, std::string>& metadata) {
    json header = json::object();
    if (!metadata.empty()) header["__metadata__"] = metadata;
    uint64_t offset = 0;
    for (const WriteTensor& t : tensors) {
        int64_t numel = 1;
        for (int64_t d : t.shape) numel *= d;
        if (t.data.size() != dtype_bytes(t.dtype, numel))
            throw Error(file + ": tensor " + t.name + ": " + str(t.data.size()) + " bytes do not match " +
                        std::string(dtype_name(t.dtype)) + " " + shape_str(t.shape));
        header[t.name] = {{"dtype", std::string(dtype_name(t.dtype))},
                          {"shape", t.shape},
                          {"data_offsets", {offset, offset + t.data.size()}}};
        offset += t.data.size();
    }
    std::string text = header.dump();
    // Pad with spaces so the data section starts 8-byte aligned, as the reference writer does.
    while ((8 + text.size()) % 8 != 0) text.push_back(' ');

    std::ofstream f(file, std::ios::binary | std::ios::trunc);
    if (!f) throw Error(file + ": cannot open for writing");
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>((uint64_t(text.size()) >> (8 * i)) & 0xff);
    f.write(reinterpret_cast<const char*>(len), 8);
    f.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const WriteTensor& t : tensors)
        f.write(reinterpret_cast<const char*>(t.data.data()), static_cast<std::streamsize>(t.data.size()));
    f.flush();
    if (!f) throw Error(file + ": write failed (disk full?)");
}

}  // namespace strata::safetensors
