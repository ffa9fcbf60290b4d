#include "worker/quant_error.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>

#include "strata/error.hpp"
#include "strata/quant.hpp"
#include "worker/analysis.hpp"

namespace strata::ui {

double QuantError::snr_db() const {
    if (rms_error == 0.0) return std::numeric_limits<double>::infinity();
    return 20.0 * std::log10(rms_original / rms_error);
}

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Rows as row_to_f32 counts them: a vector is one row.
int64_t rows_of(const strata::TensorView& t) { return t.shape.size() < 2 ? 1 : t.rows(); }

std::string shape_text(const strata::TensorView& t) {
    std::string s = "[";
    s += std::to_string(rows_of(t));
    s += ", ";
    s += std::to_string(t.cols());
    s += "]";
    return s;
}

}  // namespace

QuantError quantization_error(const strata::TensorView& weight, const strata::TensorView* original, DType as, int64_t max_rows,
                              int64_t max_cols, const std::atomic<bool>* cancel) {
    QuantError e;
    e.name = weight.name;
    e.rows = rows_of(weight);
    e.cols = weight.cols();
    if (original) {
        if (rows_of(*original) != e.rows || original->cols() != e.cols)
            throw InputError(weight.name + " is " + shape_text(weight) + " here but " + shape_text(*original) +
                             " in the original checkpoint");
        if (dtype_is_block(original->dtype))
            throw InputError("the original " + original->name + " is itself quantized (" +
                             std::string(dtype_name(original->dtype)) + "): compare with a float checkpoint");
        e.approx_type = weight.dtype;
        e.original_type = original->dtype;
    } else {
        if (!quant::can_quantize(as))
            throw InputError(std::string(dtype_name(as)) + " is not a quantized block type");
        if (dtype_is_block(weight.dtype))
            throw InputError(weight.name + " is already stored as " + std::string(dtype_name(weight.dtype)) +
                             ": open the float checkpoint it came from to compare");
        if (e.cols % dtype_block_size(as) != 0)
            throw InputError(weight.name + ": rows of " + std::to_string(e.cols) + " weights are not whole " +
                             std::string(dtype_name(as)) + " blocks of " + std::to_string(dtype_block_size(as)));
        e.approx_type = as;
        e.original_type = weight.dtype;
    }
    max_rows = std::max<int64_t>(1, max_rows);
    max_cols = std::max<int64_t>(1, max_cols);
    e.row_step = ceil_div(e.rows, max_rows);
    e.col_step = ceil_div(e.cols, max_cols);
    e.grid_rows = ceil_div(e.rows, e.row_step);
    e.grid_cols = ceil_div(e.cols, e.col_step);
    e.cells.assign(static_cast<size_t>(e.grid_rows * e.grid_cols), 0.0f);

    struct Totals {
        double err2 = 0, orig2 = 0, max_abs = -1;
        int64_t max_row = 0, max_col = 0;
    } total;
    std::mutex m;
    std::atomic<bool> stop{false};
    // One task per grid row: its weight rows write only that grid row's cells.
    analysis::parallel_for(e.grid_rows, 1, [&](int64_t g0, int64_t g1) {
        std::vector<float> orig(static_cast<size_t>(e.cols)), approx(static_cast<size_t>(e.cols));
        std::vector<std::byte> blocks(original ? 0 : static_cast<size_t>(dtype_bytes(as, e.cols)));
        Totals t;
        for (int64_t g = g0; g < g1 && !stop; ++g) {
            if (cancel && cancel->load(std::memory_order_relaxed)) {
                stop = true;
                break;
            }
            float* cell = e.cells.data() + g * e.grid_cols;
            for (int64_t r = g * e.row_step; r < std::min(e.rows, (g + 1) * e.row_step); ++r) {
                if (original) {
                    original->row_to_f32(r, orig.data());
                    weight.row_to_f32(r, approx.data());
                } else {
                    weight.row_to_f32(r, orig.data());
                    try {
                        quant::quantize(as, orig.data(), blocks.data(), e.cols);  // throws on NaN, Inf, huge
                    } catch (...) {
                        stop = true;  // the other rows need not run: parallel_for rethrows this one
                        throw;
                    }
                    quant::dequantize(as, blocks.data(), approx.data(), e.cols);
                }
                for (int64_t c = 0; c < e.cols; ++c) {
                    const double d = double(approx[size_t(c)]) - double(orig[size_t(c)]);
                    t.err2 += d * d;
                    t.orig2 += double(orig[size_t(c)]) * orig[size_t(c)];
                    if (std::abs(d) > t.max_abs) t.max_abs = std::abs(d), t.max_row = r, t.max_col = c;
                    float& k = cell[c / e.col_step];
                    if (std::abs(float(d)) > std::abs(k)) k = float(d);
                }
            }
        }
        const std::lock_guard<std::mutex> lock(m);
        total.err2 += t.err2;
        total.orig2 += t.orig2;
        if (t.max_abs > total.max_abs ||
            (t.max_abs == total.max_abs && (t.max_row < total.max_row)))
            total.max_abs = t.max_abs, total.max_row = t.max_row, total.max_col = t.max_col;
    });
    if (stop) throw Cancelled();
    const double n = double(e.rows) * double(e.cols);
    e.rms_error = std::sqrt(total.err2 / n);
    e.rms_original = std::sqrt(total.orig2 / n);
    e.rel_l2 = total.orig2 > 0 ? std::sqrt(total.err2 / total.orig2) : (total.err2 > 0 ? INFINITY : 0.0);
    e.max_abs = std::max(0.0, total.max_abs);
    e.max_row = total.max_row;
    e.max_col = total.max_col;
    return e;
}

}  // namespace strata::ui
