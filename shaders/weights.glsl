// Weights stay in their stored type (WTYPE_F32, WTYPE_F16, WTYPE_BF16, or a GGUF block type: WTYPE_Q8_0,
// WTYPE_Q4_0, WTYPE_Q4_K, WTYPE_Q5_K, WTYPE_Q6_K) and are widened to float32 here.
// The buffer is read as 32-bit words, so only core Vulkan is needed (no 8- or 16-bit storage feature).
// An includer that defines WEIGHTS_BINDING gets the weights there as words and weight_rc(row, col, cols); for the
// 16-bit and 32-bit types also weight_at(i), for block types the unit readers of quant.glsl (and WBLOCK is
// defined). One that reads 16-byte words itself only uses widen_lo/widen_hi.
#if defined(WTYPE_Q8_0) || defined(WTYPE_Q4_0) || defined(WTYPE_Q4_K) || defined(WTYPE_Q5_K) || defined(WTYPE_Q6_K)
#define WBLOCK 1
#endif

// Element i of a buffer of 16-bit values, from its word (i / 2): little-endian, element 2j is the low half of
// word j. binary16 widened exactly; bfloat16 is the high half of a float32, shifted into place.
float f16_element(uint word, uint i) { return unpackHalf2x16(word)[i & 1u]; }
float bf16_element(uint word, uint i) { return uintBitsToFloat((i & 1u) != 0u ? (word & 0xFFFF0000u) : (word << 16)); }

#if defined(WEIGHTS_BINDING)
layout(std430, binding = WEIGHTS_BINDING) readonly buffer Weights { uint w_words[]; };
#if defined(WEIGHTS_B_BINDING)
// A second matrix of the same type and row length (matvec.comp: SWIGLU reads w1 and w3 in one pass, QK wq and
// wk): w_sel picks the one that the readers below see, 0 the first, 1 the second.
layout(std430, binding = WEIGHTS_B_BINDING) readonly buffer WeightsB { uint wb_words[]; };
uint w_sel = 0u;
#if defined(WEIGHTS_C_BINDING)
// And a third (matvec.comp QKV: wq, wk and wv), w_sel 2.
layout(std430, binding = WEIGHTS_C_BINDING) readonly buffer WeightsC { uint wc_words[]; };
#define W_WORD(i) (w_sel == 0u ? w_words[i] : w_sel == 1u ? wb_words[i] : wc_words[i])
#else
#define W_WORD(i) (w_sel == 0u ? w_words[i] : wb_words[i])
#endif
#else
#define W_WORD(i) w_words[i]
#endif

#if defined(WBLOCK)
#if defined(WEIGHTS_WORDS4)
// The same words 16 bytes at a time (matvec's 16-byte form of Q4_K, whose quants lie on 16-byte boundaries).
layout(std430, binding = WEIGHTS_BINDING) readonly buffer Weights4 { uvec4 w_words4[]; };
#if defined(WEIGHTS_B_BINDING)
layout(std430, binding = WEIGHTS_B_BINDING) readonly buffer WeightsB4 { uvec4 wb_words4[]; };
#if defined(WEIGHTS_C_BINDING)
layout(std430, binding = WEIGHTS_C_BINDING) readonly buffer WeightsC4 { uvec4 wc_words4[]; };
#define W_WORD4(i) (w_sel == 0u ? w_words4[i] : w_sel == 1u ? wb_words4[i] : wc_words4[i])
#else
#define W_WORD4(i) (w_sel == 0u ? w_words4[i] : wb_words4[i])
#endif
#else
#define W_WORD4(i) w_words4[i]
#endif
#endif
#include "quant.glsl"
#else

// Element i of the weight buffer (row-major, rows packed), as float32.
float weight_at(uint i) {
#if defined(WTYPE_F32)
    return uintBitsToFloat(W_WORD(i));
#elif defined(WTYPE_F16)
    return f16_element(W_WORD(i >> 1), i);
#elif defined(WTYPE_BF16)
    return bf16_element(W_WORD(i >> 1), i);
#else
#error "define WTYPE_F32, WTYPE_F16, WTYPE_BF16 or a block type"
#endif
}
float weight_rc(uint row, uint col, uint cols) { return weight_at(row * cols + col); }
#endif  // WBLOCK
#endif  // WEIGHTS_BINDING

// Eight 16-bit weights (one 16-byte load) as two vec4: elements 0-3 and 4-7.
#if defined(WTYPE_BF16)
vec4 widen_lo(uvec4 w) {
    return vec4(uintBitsToFloat(w.x << 16), uintBitsToFloat(w.x & 0xFFFF0000u),
                uintBitsToFloat(w.y << 16), uintBitsToFloat(w.y & 0xFFFF0000u));
}
vec4 widen_hi(uvec4 w) {
    return vec4(uintBitsToFloat(w.z << 16), uintBitsToFloat(w.z & 0xFFFF0000u),
                uintBitsToFloat(w.w << 16), uintBitsToFloat(w.w & 0xFFFF0000u));
}
#elif defined(WTYPE_F16)
vec4 widen_lo(uvec4 w) { return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)); }
vec4 widen_hi(uvec4 w) { return vec4(unpackHalf2x16(w.z), unpackHalf2x16(w.w)); }
#endif
