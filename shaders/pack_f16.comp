#version 450
// dst word i = src[2i] | src[2i + 1] << 16 as binary16 (a KV cache in binary16, kv.glsl): rounded to nearest,
// ties to even, by integer arithmetic (packHalf2x16 leaves the rounding to the implementation). NaN stays NaN
// and an infinity stays infinite; a finite value beyond binary16's range becomes +-65504 (its largest).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;
#include "common.glsl"
layout(std430, binding = 0) readonly buffer S { float s[]; };
layout(std430, binding = 1) writeonly buffer D { uint d[]; };
layout(push_constant) uniform Push { uint words; uint s_first; uint d_first; } p;

uint half_bits(float f) {
    const uint x = floatBitsToUint(f), sign = (x >> 16u) & 0x8000u, a = x & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return sign | 0x7E00u;                            // NaN
    if (a == 0x7F800000u) return sign | 0x7C00u;                           // infinity
    if (a >= 0x477FF000u) return sign | 0x7BFFu;                           // would round to infinity: 65504
    if (a < 0x38800000u) return sign | uint(roundEven(uintBitsToFloat(a) * 16777216.0));  // subnormal: units of 2^-24
    const uint r = a - 0x38000000u;                                        // exponent 127 -> 15 bias
    return sign | ((r + 0x0FFFu + ((r >> 13u) & 1u)) >> 13u);              // 23 -> 10 mantissa bits, ties to even
}

void main() {
    const uint i = global_index();
    if (i < p.words)
        d[p.d_first + i] = half_bits(s[p.s_first + 2u * i]) | (half_bits(s[p.s_first + 2u * i + 1u]) << 16u);
}
