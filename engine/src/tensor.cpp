#include "strata/tensor.hpp"

#include <cstring>

#include "strata/error.hpp"
#include "strata/quant.hpp"

namespace strata {

int64_t TensorView::numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

int64_t TensorView::physical_row(int64_t r) const {
    if (rope_heads <= 0) return r;
    // Hugging Face's converter permuted each head's rows: Meta row 2i+p (pair i, half p) became row
    // p*(head_dim/2)+i. Canonical row r therefore lives at that Hugging Face row.
    const int64_t head_dim = rows() / rope_heads;
    const int64_t h = r / head_dim, m = r % head_dim;
    return h * head_dim + (m % 2) * (head_dim / 2) + m / 2;
}

void TensorView::row_to_f32(int64_t r, float* out) const {
    if (r < 0 || r >= (shape.size() < 2 ? 1 : rows()))
        throw InputError(name + ": row " + std::to_string(r) + " out of range");
    const int64_t n = cols();
    const std::byte* p = shape.size() < 2 ? data : row_ptr(r);
    switch (dtype) {
        case DType::F32: std::memcpy(out, p, static_cast<size_t>(n) * 4); return;
        case DType::F16:
            for (int64_t i = 0; i < n; ++i) {
                uint16_t h;
                std::memcpy(&h, p + 2 * i, 2);
                out[i] = f16_to_f32(h);
            }
            return;
        case DType::BF16:
            for (int64_t i = 0; i < n; ++i) {
                uint16_t h;
                std::memcpy(&h, p + 2 * i, 2);
                out[i] = bf16_to_f32(h);
            }
            return;
        default: quant::dequantize(dtype, p, out, n); return;  // ggml block types
    }
}

std::vector<float> TensorView::to_f32() const {
    const int64_t r = shape.size() < 2 ? 1 : rows();
    std::vector<float> out(static_cast<size_t>(r * cols()));
    for (int64_t i = 0; i < r; ++i) row_to_f32(i, out.data() + i * cols());
    return out;
}

}  // namespace strata
