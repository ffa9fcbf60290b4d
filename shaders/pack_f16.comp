#version 450
// dst word i = src[2i] | src[2i + 1] << 16 as binary16 (a KV cache in binary16, kv.glsl), rounded by half.glsl.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;
#include "common.glsl"
layout(std430, binding = 0) readonly buffer S { float s[]; };
layout(std430, binding = 1) writeonly buffer D { uint d[]; };
layout(push_constant) uniform Push { uint words; uint s_first; uint d_first; } p;

#include "half.glsl"

void main() {
    const uint i = global_index();
    if (i < p.words)
        d[p.d_first + i] = half_pair(s[p.s_first + 2u * i], s[p.s_first + 2u * i + 1u]);
}
