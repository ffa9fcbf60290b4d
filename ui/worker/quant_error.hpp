#pragma once
// What quantization does to one weight: the error (approximation minus original) over the whole matrix, reduced to
// a grid of at most max_rows x max_cols cells (each cell keeps the error of largest magnitude in its bucket, so a
// single bad block stays visible), and its summary statistics. Two ways to get an approximation and an original:
//   - a float weight and a block type `as`: the weight is quantized to `as` and dequantized again, row by row
//     (what a `strata-cli quantize --type as` would store);
//   - a stored weight (any type) and the same weight from another checkpoint (`original`, the float one).
// Plain C++ over the engine's types, run on a worker thread; rows stream through, so memory stays O(grid + row).
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "strata/dtype.hpp"
#include "strata/tensor.hpp"

namespace strata::ui {

struct QuantError {
    std::string name;
    DType approx_type = DType::F32;    // the type the approximation is stored in
    DType original_type = DType::F32;  // the type the original is stored in
    int64_t rows = 0, cols = 0;        // the weight, canonical [out, in] (a vector is [1, n])
    int64_t grid_rows = 0, grid_cols = 0, row_step = 1, col_step = 1;
    std::vector<float> cells;          // [grid_rows, grid_cols]: per bucket the error of largest magnitude
    double rel_l2 = 0.0;               // ||error|| / ||original||
    double rms_error = 0.0, rms_original = 0.0;
    double max_abs = 0.0;              // largest |error|
    int64_t max_row = 0, max_col = 0;  // where it is
    double snr_db() const;             // 20 log10(rms_original / rms_error); +inf for an exact copy
};

// `as` quantizes the float weight `weight` (original == nullptr); or `original` (same name and shape, any float
// type) is compared with `weight` as stored (`as` ignored). Throws InputError when the shapes differ, when the
// row length is not whole blocks of `as`, or when `as` is not a block type; Cancelled when *cancel turns true.
QuantError quantization_error(const strata::TensorView& weight, const strata::TensorView* original, DType as, int64_t max_rows,
                              int64_t max_cols, const std::atomic<bool>* cancel = nullptr);

}  // namespace strata::ui
