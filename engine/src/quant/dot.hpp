#pragma once
// The fused block dot product behind quant::dot (dot.cpp).
#include <cstdint>

#include "strata/cpu_isa.hpp"
#include "strata/dtype.hpp"

namespace strata::quant::detail {

// sum_i w[i] * x[i] over n weights (a multiple of the block size) of a block-type row, with the kernels of
// `isa` (which the CPU must support).
float dot_blocks(DType t, const uint8_t* row, const float* x, int64_t n, CpuIsa isa);

}  // namespace strata::quant::detail
