#pragma once
// Storage types of weights. Activations are always float32.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace strata {

enum class DType : uint8_t {
    F32,
    F16,
    BF16,
    // GGUF block types (the quantization issue); readers report them as unsupported until then.
    Q8_0,
    Q4_0,
    Q4_K,
    Q5_K,
    Q6_K,
};

std::string_view dtype_name(DType t);  // "F32", "BF16", "Q4_K", ...
bool dtype_is_block(DType t);          // quantized block type
int64_t dtype_block_size(DType t);     // elements per block (1 for F32/F16/BF16)
int64_t dtype_block_bytes(DType t);    // bytes per block
// Bytes taken by n elements (n must be a multiple of the block size for block types).
uint64_t dtype_bytes(DType t, int64_t n);

// Scalar conversions (exact, including subnormals, inf and nan).
float f16_to_f32(uint16_t h);
float bf16_to_f32(uint16_t b);
uint16_t f32_to_f16(float f);   // round to nearest even
// As f32_to_f16, but a finite value beyond binary16's range becomes +-65504 instead of an infinity (a KV cache in
// binary16, Backend::store_f16).
uint16_t f32_to_f16_saturating(float f);
uint16_t f32_to_bf16(float f);  // round to nearest even

}  // namespace strata
