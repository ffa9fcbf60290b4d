#pragma once
// A read-only memory map of a whole file. Weights are views into these, never copies.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

namespace strata {

class MappedFile {
public:
    MappedFile() = default;
    // Throws FormatError naming the path when the file cannot be opened or mapped.
    explicit MappedFile(const std::filesystem::path& path);
    ~MappedFile();
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const std::byte* data() const { return data_; }
    uint64_t size() const { return size_; }
    std::span<const std::byte> bytes() const { return {data_, static_cast<size_t>(size_)}; }
    const std::filesystem::path& path() const { return path_; }

    // The bytes [offset, offset + n) or a FormatError naming the file, what, and the bounds.
    std::span<const std::byte> slice(uint64_t offset, uint64_t n, std::string_view what) const;

private:
    std::filesystem::path path_;
    const std::byte* data_ = nullptr;
    uint64_t size_ = 0;
};

}  // namespace strata
