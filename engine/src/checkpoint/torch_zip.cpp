// ZIP reading and writing for torch.save archives. Field layouts follow PKWARE's APPNOTE.TXT (sections 4.3.7
// local header, 4.3.12 central directory header, 4.3.14-4.3.16 Zip64 end records, 4.5.3 Zip64 extra field).
#include "torch_zip.hpp"

#include <array>
#include <cstdio>
#include <cstring>
#include <unordered_set>

#include "strata/error.hpp"

namespace strata::torch_zip {

namespace {

constexpr uint32_t kLocalSig = 0x04034b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kEndSig = 0x06054b50;
constexpr uint32_t kZip64EndSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint16_t kPaddingExtraId = 0x4246;  // "FB": torch's alignment padding
constexpr uint64_t kAlign = 64;               // torch aligns member data so tensors can be mapped in place
constexpr uint32_t kMax32 = 0xFFFFFFFFu;
constexpr uint16_t kMax16 = 0xFFFFu;
constexpr size_t kLocalSize = 30, kCentralSize = 46, kEndSize = 22, kZip64EndSize = 56, kLocatorSize = 20;

template <typename T>
T get(std::span<const std::byte> b, uint64_t at) {
    T v;
    std::memcpy(&v, b.data() + at, sizeof(T));
    return v;
}

constexpr std::array<uint32_t, 256> make_crc_table() {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
        uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        t[i] = c;
    }
    return t;
}
constexpr auto kCrcTable = make_crc_table();

std::string method_name(uint16_t m) {
    switch (m) {
        case 8: return "deflate";
        case 9: return "deflate64";
        case 12: return "bzip2";
        case 14: return "lzma";
        case 93: return "zstd";
        default: return "method " + std::to_string(m);
    }
}

}  // namespace

uint32_t crc32(uint32_t crc, const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    crc = ~crc;
    for (size_t i = 0; i < n; ++i) crc = kCrcTable[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

Archive::Archive(std::span<const std::byte> bytes, std::string file) : bytes_(bytes), file_(std::move(file)) {
    const uint64_t size = bytes.size();
    auto fail = [&](const std::string& what, uint64_t at) -> void {
        throw FormatError(file_ + ": " + what + " (at byte offset " + std::to_string(at) + " of " +
                          std::to_string(size) + ")");
    };
    if (size < kEndSize)
        throw FormatError(file_ + ": " + std::to_string(size) + " bytes is too short for a zip archive (torch.save "
                          "writes one); the file is truncated or not a PyTorch checkpoint");

    // The end record sits in the last 22 + 65535 bytes (its comment may be up to 65535 bytes long).
    uint64_t end = UINT64_MAX;
    const uint64_t lowest = size - kEndSize > kMax16 ? size - kEndSize - kMax16 : 0;
    for (uint64_t at = size - kEndSize + 1; at-- > lowest;) {
        if (get<uint32_t>(bytes, at) == kEndSig && at + kEndSize + get<uint16_t>(bytes, at + 20) <= size) {
            end = at;
            break;
        }
    }
    if (end == UINT64_MAX)
        throw FormatError(file_ + ": no zip end-of-central-directory record: the file is truncated or is not the "
                          "zip archive torch.save writes");
    if (get<uint16_t>(bytes, end + 4) != 0 || get<uint16_t>(bytes, end + 6) != 0)
        fail("multi-disk (split) zip archives are not supported", end);
    uint64_t entries = get<uint16_t>(bytes, end + 10);
    uint64_t cd_size = get<uint32_t>(bytes, end + 12);
    uint64_t cd_offset = get<uint32_t>(bytes, end + 16);
    uint64_t cd_limit = end;  // the central directory ends before the end records

    // Zip64: a locator right before the end record points at the Zip64 end record with 64-bit fields.
    if (end >= kLocatorSize && get<uint32_t>(bytes, end - kLocatorSize) == kZip64LocatorSig) {
        const uint64_t loc = end - kLocatorSize;
        const uint64_t z = get<uint64_t>(bytes, loc + 8);
        if (z > loc || loc - z < kZip64EndSize || get<uint32_t>(bytes, z) != kZip64EndSig)
            fail("the Zip64 locator points at " + std::to_string(z) + ", where there is no Zip64 end record", loc);
        entries = get<uint64_t>(bytes, z + 32);
        cd_size = get<uint64_t>(bytes, z + 40);
        cd_offset = get<uint64_t>(bytes, z + 48);
        cd_limit = z;
    }
    if (cd_offset > cd_limit || cd_size > cd_limit - cd_offset)
        fail("the central directory [" + std::to_string(cd_offset) + ", +" + std::to_string(cd_size) +
                 ") does not lie before the end record",
             end);
    if (entries > cd_size / kCentralSize)
        fail("the end record claims " + std::to_string(entries) + " entries, but a central directory of " +
                 std::to_string(cd_size) + " bytes holds at most " + std::to_string(cd_size / kCentralSize),
             end);

    members_.reserve(entries);
    uint64_t at = cd_offset;
    const uint64_t cd_end = cd_offset + cd_size;
    for (uint64_t k = 0; k < entries; ++k) {
        if (cd_end - at < kCentralSize)
            fail("central directory entry " + std::to_string(k) + " is truncated", at);
        if (get<uint32_t>(bytes, at) != kCentralSig)
            fail("bad central directory entry " + std::to_string(k) + " (signature " +
                     std::to_string(get<uint32_t>(bytes, at)) + ")",
                 at);
        Member m;
        m.flags = get<uint16_t>(bytes, at + 8);
        m.method = get<uint16_t>(bytes, at + 10);
        m.crc32 = get<uint32_t>(bytes, at + 16);
        m.compressed_size = get<uint32_t>(bytes, at + 20);
        m.size = get<uint32_t>(bytes, at + 24);
        const uint64_t nlen = get<uint16_t>(bytes, at + 28);
        const uint64_t xlen = get<uint16_t>(bytes, at + 30);
        const uint64_t clen = get<uint16_t>(bytes, at + 32);
        m.local_header = get<uint32_t>(bytes, at + 42);
        if (cd_end - at - kCentralSize < nlen + xlen + clen)
            fail("central directory entry " + std::to_string(k) + " runs past the directory", at);
        m.name.assign(reinterpret_cast<const char*>(bytes.data() + at + kCentralSize), nlen);
        // Zip64 extra field: the 64-bit values of exactly those fields that hold 0xFFFFFFFF, in this order.
        uint64_t x = at + kCentralSize + nlen;
        const uint64_t x_end = x + xlen;
        while (x_end - x >= 4) {
            const uint16_t id = get<uint16_t>(bytes, x);
            const uint16_t len = get<uint16_t>(bytes, x + 2);
            if (x_end - x - 4 < len) fail("extra field of " + m.name + " runs past its entry", x);
            if (id == kZip64ExtraId) {
                uint64_t p = x + 4;
                const uint64_t p_end = p + len;
                for (uint64_t* field : {&m.size, &m.compressed_size, &m.local_header}) {
                    if (*field != kMax32) continue;
                    if (p_end - p < 8) fail("Zip64 extra field of " + m.name + " is too short", x);
                    *field = get<uint64_t>(bytes, p);
                    p += 8;
                }
            }
            x += 4 + len;
        }
        if (!index_.emplace(m.name, members_.size()).second)
            fail("member " + m.name + " appears twice in the central directory", at);
        members_.push_back(std::move(m));
        at += kCentralSize + nlen + xlen + clen;
    }
}

const Member* Archive::find(std::string_view name) const {
    const auto it = index_.find(std::string(name));
    return it == index_.end() ? nullptr : &members_[it->second];
}

std::span<const std::byte> Archive::checked_data(const Member& m) const {
    const std::span<const std::byte> d = data(m);
    const uint32_t crc = crc32(0, d.data(), d.size());
    if (crc != m.crc32) {
        char got[16], want[16];
        std::snprintf(got, sizeof got, "%08x", crc);
        std::snprintf(want, sizeof want, "%08x", m.crc32);
        throw FormatError(file_ + ": member " + m.name + " is damaged: its CRC-32 is " + got +
                          " but the central directory says " + want);
    }
    return d;
}

uint64_t Archive::data_offset(const Member& m) const {
    const uint64_t size = bytes_.size();
    if (m.local_header > size || size - m.local_header < kLocalSize ||
        get<uint32_t>(bytes_, m.local_header) != kLocalSig)
        throw FormatError(file_ + ": member " + m.name + ": no local file header at offset " +
                          std::to_string(m.local_header) + " (the file has " + std::to_string(size) + " bytes)");
    const uint64_t nlen = get<uint16_t>(bytes_, m.local_header + 26);
    const uint64_t xlen = get<uint16_t>(bytes_, m.local_header + 28);
    return m.local_header + kLocalSize + nlen + xlen;
}

std::span<const std::byte> Archive::data(const Member& m) const {
    if (m.flags & 1)
        throw FormatError(file_ + ": member " + m.name + " is encrypted; torch.save archives never are");
    if (m.method != 0)
        throw FormatError(file_ + ": member " + m.name + " is compressed (" + method_name(m.method) +
                          "); Strata maps tensors in place and reads only stored (uncompressed) members, as "
                          "torch.save writes them");
    if (m.compressed_size != m.size)
        throw FormatError(file_ + ": stored member " + m.name + " has compressed size " +
                          std::to_string(m.compressed_size) + " but size " + std::to_string(m.size));
    const uint64_t off = data_offset(m);
    const uint64_t size = bytes_.size();
    if (off > size || m.size > size - off)
        throw FormatError(file_ + ": member " + m.name + " data [" + std::to_string(off) + ", +" +
                          std::to_string(m.size) + ") runs past the end of the file (" + std::to_string(size) +
                          " bytes): truncated?");
    return bytes_.subspan(off, m.size);
}

// ---- writing ----

namespace {

template <typename T>
void put(std::ostream& os, T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    os.write(b, sizeof(T));
}

constexpr uint16_t kDosDate = (0 << 9) | (1 << 5) | 1;  // 1980-01-01: fixed, so output is reproducible

}  // namespace

Writer::Writer(const std::filesystem::path& out, bool force_zip64)
    : path_(out), os_(out, std::ios::binary | std::ios::trunc), force_zip64_(force_zip64) {
    if (!os_) throw Error(out.string() + ": cannot open for writing");
}

void Writer::add(const std::string& name, std::string_view bytes) {
    add(name, bytes.size(), [&](const Sink& sink) { sink(bytes.data(), bytes.size()); });
}

void Writer::add(const std::string& name, uint64_t size, const std::function<void(const Sink&)>& write) {
    Member m;
    m.name = name;
    m.size = m.compressed_size = size;
    m.local_header = static_cast<uint64_t>(os_.tellp());
    const bool zip64 = force_zip64_ || size >= kMax32;
    const uint64_t zip64_len = zip64 ? 4 + 16 : 0;
    // Pad with torch's "FB" extra field so the data starts at a multiple of 64.
    const uint64_t before_pad = m.local_header + kLocalSize + name.size() + zip64_len + 4;
    const uint64_t pad = (kAlign - before_pad % kAlign) % kAlign;

    put<uint32_t>(os_, kLocalSig);
    put<uint16_t>(os_, zip64 ? 45 : 20);  // version needed: 4.5 for Zip64
    put<uint16_t>(os_, 0);                // flags
    put<uint16_t>(os_, 0);                // stored
    put<uint16_t>(os_, 0);                // time
    put<uint16_t>(os_, kDosDate);
    put<uint32_t>(os_, 0);                // CRC-32, patched after the data
    put<uint32_t>(os_, zip64 ? kMax32 : static_cast<uint32_t>(size));
    put<uint32_t>(os_, zip64 ? kMax32 : static_cast<uint32_t>(size));
    put<uint16_t>(os_, static_cast<uint16_t>(name.size()));
    put<uint16_t>(os_, static_cast<uint16_t>(zip64_len + 4 + pad));
    os_.write(name.data(), static_cast<std::streamsize>(name.size()));
    if (zip64) {
        put<uint16_t>(os_, kZip64ExtraId);
        put<uint16_t>(os_, 16);
        put<uint64_t>(os_, size);
        put<uint64_t>(os_, size);
    }
    put<uint16_t>(os_, kPaddingExtraId);
    put<uint16_t>(os_, static_cast<uint16_t>(pad));
    for (uint64_t i = 0; i < pad; ++i) os_.put('Z');  // torch pads with 'Z'

    uint32_t crc = 0;
    uint64_t written = 0;
    write([&](const void* p, size_t n) {
        crc = crc32(crc, p, n);
        written += n;
        os_.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
    });
    if (written != size)
        throw Error(path_.string() + ": member " + name + " wrote " + std::to_string(written) + " bytes, expected " +
                    std::to_string(size));
    m.crc32 = crc;
    const auto end = os_.tellp();
    os_.seekp(static_cast<std::streamoff>(m.local_header + 14));
    put<uint32_t>(os_, crc);
    os_.seekp(end);
    if (!os_) throw Error(path_.string() + ": write failed in member " + name + " (disk full?)");
    written_.push_back(std::move(m));
}

void Writer::finish() {
    const uint64_t cd_offset = static_cast<uint64_t>(os_.tellp());
    for (const Member& m : written_) {
        const bool big_size = force_zip64_ || m.size >= kMax32;
        const bool big_offset = force_zip64_ || m.local_header >= kMax32;
        const uint64_t zip64_fields = (big_size ? 2 : 0) + (big_offset ? 1 : 0);
        const uint64_t xlen = zip64_fields ? 4 + 8 * zip64_fields : 0;
        put<uint32_t>(os_, kCentralSig);
        put<uint16_t>(os_, 45);  // version made by (4.5, MS-DOS attributes)
        put<uint16_t>(os_, zip64_fields ? 45 : 20);
        put<uint16_t>(os_, 0);
        put<uint16_t>(os_, 0);
        put<uint16_t>(os_, 0);
        put<uint16_t>(os_, kDosDate);
        put<uint32_t>(os_, m.crc32);
        put<uint32_t>(os_, big_size ? kMax32 : static_cast<uint32_t>(m.size));
        put<uint32_t>(os_, big_size ? kMax32 : static_cast<uint32_t>(m.size));
        put<uint16_t>(os_, static_cast<uint16_t>(m.name.size()));
        put<uint16_t>(os_, static_cast<uint16_t>(xlen));
        put<uint16_t>(os_, 0);  // comment
        put<uint16_t>(os_, 0);  // disk
        put<uint16_t>(os_, 0);  // internal attributes
        put<uint32_t>(os_, 0);  // external attributes
        put<uint32_t>(os_, big_offset ? kMax32 : static_cast<uint32_t>(m.local_header));
        os_.write(m.name.data(), static_cast<std::streamsize>(m.name.size()));
        if (zip64_fields) {
            put<uint16_t>(os_, kZip64ExtraId);
            put<uint16_t>(os_, static_cast<uint16_t>(8 * zip64_fields));
            if (big_size) {
                put<uint64_t>(os_, m.size);
                put<uint64_t>(os_, m.size);
            }
            if (big_offset) put<uint64_t>(os_, m.local_header);
        }
    }
    const uint64_t cd_end = static_cast<uint64_t>(os_.tellp());
    const uint64_t cd_size = cd_end - cd_offset;
    const uint64_t n = written_.size();
    const bool zip64 = force_zip64_ || n >= kMax16 || cd_offset >= kMax32 || cd_size >= kMax32;
    if (zip64) {
        put<uint32_t>(os_, kZip64EndSig);
        put<uint64_t>(os_, kZip64EndSize - 12);  // size of the rest of the record
        put<uint16_t>(os_, 45);
        put<uint16_t>(os_, 45);
        put<uint32_t>(os_, 0);
        put<uint32_t>(os_, 0);
        put<uint64_t>(os_, n);
        put<uint64_t>(os_, n);
        put<uint64_t>(os_, cd_size);
        put<uint64_t>(os_, cd_offset);
        put<uint32_t>(os_, kZip64LocatorSig);
        put<uint32_t>(os_, 0);
        put<uint64_t>(os_, cd_end);  // where the Zip64 end record starts
        put<uint32_t>(os_, 1);
    }
    put<uint32_t>(os_, kEndSig);
    put<uint16_t>(os_, 0);
    put<uint16_t>(os_, 0);
    put<uint16_t>(os_, zip64 ? kMax16 : static_cast<uint16_t>(n));
    put<uint16_t>(os_, zip64 ? kMax16 : static_cast<uint16_t>(n));
    put<uint32_t>(os_, zip64 ? kMax32 : static_cast<uint32_t>(cd_size));
    put<uint32_t>(os_, zip64 ? kMax32 : static_cast<uint32_t>(cd_offset));
    put<uint16_t>(os_, 0);
    os_.flush();
    if (!os_) throw Error(path_.string() + ": write failed (disk full?)");
    os_.close();
}

}  // namespace strata::torch_zip
