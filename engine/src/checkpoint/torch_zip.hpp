#pragma once
// The ZIP container torch.save writes (PKWARE APPNOTE): members stored uncompressed, each member's data aligned to
// 64 bytes by padding in the local header's extra field, Zip64 records once the archive passes 4 GiB (a Llama 3 8B
// consolidated.00.pth is 16 GB). Reading parses the central directory and returns byte ranges into the mapped file,
// so weights are never copied; writing streams members and patches each CRC-32 after its data.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace strata::torch_zip {

struct Member {
    std::string name;
    uint16_t method = 0;           // 0 = stored; anything else is compressed
    uint16_t flags = 0;
    uint32_t crc32 = 0;
    uint64_t compressed_size = 0;
    uint64_t size = 0;             // uncompressed
    uint64_t local_header = 0;     // offset of the local file header
};

class Archive {
public:
    // Parses the end-of-central-directory record (Zip64 when present) and every central directory entry of the
    // archive in `bytes`. FormatError naming `file` and the offset for anything truncated, lying or unsupported.
    Archive(std::span<const std::byte> bytes, std::string file);

    const std::vector<Member>& members() const { return members_; }
    // By name, in constant time (a crafted archive with many members must not make loading quadratic).
    const Member* find(std::string_view name) const;
    // The member's data as it lies in the archive (the local header is checked). FormatError when the member is
    // compressed or encrypted (only stored members can be mapped in place) or its data leaves the file.
    std::span<const std::byte> data(const Member& m) const;
    // Offset of the member's data inside the archive file.
    uint64_t data_offset(const Member& m) const;
    // data(), after checking the member's CRC-32 against the central directory (FormatError when it differs).
    // For the small members whose bytes are parsed (data.pkl, byteorder); tensor data is mapped, not read.
    std::span<const std::byte> checked_data(const Member& m) const;
    const std::string& file() const { return file_; }

private:
    std::span<const std::byte> bytes_;
    std::string file_;
    std::vector<Member> members_;
    std::unordered_map<std::string, size_t> index_;  // name -> position in members_
};

// CRC-32 (IEEE 802.3, as ZIP uses it), continued from `crc` (0 to start).
uint32_t crc32(uint32_t crc, const void* data, size_t n);

class Writer {
public:
    // `force_zip64` writes Zip64 records even for small archives (tests exercise the >4 GiB path with it).
    explicit Writer(const std::filesystem::path& out, bool force_zip64 = false);
    // Adds a stored member whose data (exactly `size` bytes) comes from `write`, which calls the sink as often as
    // it likes. The data starts at a multiple of 64 bytes, as torch.save aligns it.
    using Sink = std::function<void(const void*, size_t)>;
    void add(const std::string& name, uint64_t size, const std::function<void(const Sink&)>& write);
    void add(const std::string& name, std::string_view bytes);
    // Writes the central directory and end records. Throws Error naming the file on any write failure.
    void finish();

private:
    std::filesystem::path path_;
    std::ofstream os_;
    bool force_zip64_;
    std::vector<Member> written_;
};

}  // namespace strata::torch_zip
