#pragma once
// NumPy .npy files (format 1.0/2.0, little-endian float32/float64, C order): how tensors leave and enter Strata.
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace strata {

struct NpyArray {
    std::vector<int64_t> shape;
    std::vector<float> data;  // float64 files are narrowed to float32
};

// Throws FormatError naming the file when it is not a float32/float64 C-order .npy.
NpyArray read_npy(const std::filesystem::path& file);
// Writes float32 data of `shape`; throws Error when the file cannot be written.
void write_npy(const std::filesystem::path& file, std::span<const float> data, std::span<const int64_t> shape);

}  // namespace strata
