// float32 -> binary16 bits, rounded to nearest with ties to even by integer arithmetic (packHalf2x16 leaves the
// rounding to the implementation), as strata::f32_to_f16_saturating does: NaN stays NaN, an infinity stays
// infinite, a finite value beyond binary16's range becomes +-65504 (its largest). The KV cache in binary16.
uint half_bits(float f) {
    const uint x = floatBitsToUint(f), sign = (x >> 16u) & 0x8000u, a = x & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return sign | 0x7E00u;                            // NaN
    if (a == 0x7F800000u) return sign | 0x7C00u;                           // infinity
    if (a >= 0x477FF000u) return sign | 0x7BFFu;                           // would round to infinity: 65504
    if (a < 0x38800000u) return sign | uint(roundEven(uintBitsToFloat(a) * 16777216.0));  // subnormal: units of 2^-24
    const uint r = a - 0x38000000u;                                        // exponent 127 -> 15 bias
    return sign | ((r + 0x0FFFu + ((r >> 13u) & 1u)) >> 13u);              // 23 -> 10 mantissa bits, ties to even
}

// Elements 2i and 2i + 1 as one word (2i in the low half): kv.glsl's layout.
uint half_pair(float lo, float hi) { return half_bits(lo) | (half_bits(hi) << 16u); }
