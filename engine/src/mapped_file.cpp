#include "strata/mapped_file.hpp"

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "strata/error.hpp"

namespace strata {

MappedFile::MappedFile(const std::filesystem::path& path) : path_(path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw FormatError(path.string() + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        int e = errno;
        ::close(fd);
        throw FormatError(path.string() + ": cannot stat: " + std::strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        throw FormatError(path.string() + ": not a regular file");
    }
    size_ = static_cast<uint64_t>(st.st_size);
    if (size_ > 0) {
        void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            ::close(fd);
            throw FormatError(path.string() + ": cannot map " + std::to_string(size_) + " bytes: " + std::strerror(e));
        }
        data_ = static_cast<const std::byte*>(p);
    }
    ::close(fd);  // the mapping keeps the file alive
}

MappedFile::~MappedFile() {
    if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& o) noexcept
    : path_(std::move(o.path_)), data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
    if (this != &o) {
        if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
        path_ = std::move(o.path_);
        data_ = std::exchange(o.data_, nullptr);
        size_ = std::exchange(o.size_, 0);
    }
    return *this;
}

std::span<const std::byte> MappedFile::slice(uint64_t offset, uint64_t n, std::string_view what) const {
    if (offset > size_ || n > size_ - offset)
        throw FormatError(path_.string() + ": " + std::string(what) + " spans bytes [" + std::to_string(offset) + ", " +
                          std::to_string(offset) + "+" + std::to_string(n) + ") but the file has " +
                          std::to_string(size_) + " bytes");
    return {data_ + offset, static_cast<size_t>(n)};
}

}  // namespace strata
