#include "strata/npy.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "strata/error.hpp"

namespace strata {

namespace {
std::string field(const std::string& header, const std::string& key) {
    auto k = header.find("'" + key + "'");
    if (k == std::string::npos) return {};
    auto colon = header.find(':', k);
    if (colon == std::string::npos) return {};
    return header.substr(colon + 1);
}
}  // namespace

NpyArray read_npy(const std::filesystem::path& file) {
    std::ifstream f(file, std::ios::binary);
    if (!f) throw FormatError(file.string() + ": cannot open");
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const std::string where = file.string() + ": ";
    if (bytes.size() < 10 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0)
        throw FormatError(where + "not a .npy file (no \\x93NUMPY magic)");
    uint8_t major = static_cast<uint8_t>(bytes[6]);
    size_t header_len = 0, header_start = 0;
    if (major == 1) {
        header_len = uint8_t(bytes[8]) | (size_t(uint8_t(bytes[9])) << 8);
        header_start = 10;
    } else if (major == 2 || major == 3) {
        if (bytes.size() < 12) throw FormatError(where + "truncated header");
        header_len = uint32_t(uint8_t(bytes[8])) | (uint32_t(uint8_t(bytes[9])) << 8) |
                     (uint32_t(uint8_t(bytes[10])) << 16) | (uint32_t(uint8_t(bytes[11])) << 24);
        header_start = 12;
    } else {
        throw FormatError(where + "unsupported .npy version " + std::to_string(major));
    }
    if (header_start + header_len > bytes.size()) throw FormatError(where + "header runs past the end of the file");
    std::string header = bytes.substr(header_start, header_len);
    // The header goes into messages cut short: a version 2 header can be 4 GB.
    const std::string shown = header.size() > 120 ? header.substr(0, 120) + "..." : header;
    std::string descr = field(header, "descr");
    size_t elem = 0;
    bool f64 = false;
    if (descr.find("<f4") != std::string::npos) {
        elem = 4;
    } else if (descr.find("<f8") != std::string::npos) {
        elem = 8;
        f64 = true;
    } else {
        throw FormatError(where + "dtype must be little-endian float32 or float64, header: " + shown);
    }
    if (field(header, "fortran_order").find("False") == std::string::npos)
        throw FormatError(where + "Fortran order is not supported");
    std::string shape_s = field(header, "shape");
    auto open = shape_s.find('('), close = shape_s.find(')');
    if (open == std::string::npos || close == std::string::npos || close < open)
        throw FormatError(where + "no shape in header");
    const size_t data_start = header_start + header_len;
    const uint64_t available = (bytes.size() - data_start) / elem;  // whole elements after the header
    NpyArray out;
    std::stringstream ss(shape_s.substr(open + 1, close - open - 1));
    std::string part;
    // The element count, formed without overflow: past what the file can hold it stops growing (`beyond`), which
    // is an error unless another dimension is 0.
    bool zero = false, beyond = false;
    uint64_t nonzero = 1;
    while (std::getline(ss, part, ',')) {
        const size_t b = part.find_first_not_of(' ');
        if (b == std::string::npos) continue;
        size_t e = part.find_last_not_of(' ');
        if (e > b && part[e] == 'L') --e;  // Python 2's numpy wrote long dimensions as "3L"
        int64_t d = 0;
        const auto r = std::from_chars(part.data() + b, part.data() + e + 1, d);
        if (r.ec != std::errc() || r.ptr != part.data() + e + 1)
            throw FormatError(where + "shape dimension \"" + part.substr(b, std::min<size_t>(e + 1 - b, 40)) +
                              "\" is not an integer");
        if (d < 0) throw FormatError(where + "negative dimension");
        out.shape.push_back(d);
        if (d == 0) zero = true;
        else if (beyond || static_cast<uint64_t>(d) > available / nonzero) beyond = true;
        else nonzero *= static_cast<uint64_t>(d);
    }
    if (!zero && beyond)
        throw FormatError(where + "data truncated: the shape needs more than the " +
                          std::to_string(bytes.size() - data_start) + " bytes after the header");
    const uint64_t n = zero ? 0 : nonzero;
    if (bytes.size() - data_start < n * elem)
        throw FormatError(where + "data truncated: expected " + std::to_string(n * elem) + " bytes, found " +
                          std::to_string(bytes.size() - data_start));
    out.data.resize(n);
    const char* p = bytes.data() + data_start;
    if (f64) {
        for (uint64_t i = 0; i < n; ++i) {
            double d;
            std::memcpy(&d, p + i * 8, 8);
            out.data[i] = static_cast<float>(d);
        }
    } else if (n > 0) {  // (an empty vector's data() may be null, which memcpy does not accept)
        std::memcpy(out.data.data(), p, n * 4);
    }
    return out;
}

void write_npy(const std::filesystem::path& file, std::span<const float> data, std::span<const int64_t> shape) {
    std::string dims;
    for (size_t i = 0; i < shape.size(); ++i) dims += std::to_string(shape[i]) + (shape.size() == 1 ? "," : (i + 1 < shape.size() ? ", " : ""));
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
    // Pad so that the data starts on a 64-byte boundary; the header ends with '\n'.
    size_t total = 10 + header.size() + 1;
    header.append((64 - total % 64) % 64, ' ');
    header += '\n';
    std::ofstream f(file, std::ios::binary);
    if (!f) throw Error(file.string() + ": cannot write");
    f.write("\x93NUMPY\x01\x00", 8);
    uint16_t len = static_cast<uint16_t>(header.size());
    char lenb[2] = {char(len & 0xff), char(len >> 8)};
    f.write(lenb, 2);
    f.write(header.data(), static_cast<std::streamsize>(header.size()));
    f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size() * 4));
    if (!f) throw Error(file.string() + ": write failed");
}

}  // namespace strata
