#version 450
// dst = src, elementwise (ranges of activation buffers).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;
#include "common.glsl"
layout(std430, binding = 0) readonly buffer S { float s[]; };
layout(std430, binding = 1) writeonly buffer D { float d[]; };
layout(push_constant) uniform Push { uint n; uint s_first; uint d_first; } p;
void main() {
    const uint i = global_index();
    if (i < p.n) d[p.d_first + i] = s[p.s_first + i];
}
