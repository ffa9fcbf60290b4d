#version 450
// FeedForward's gate: hidden = silu(w1 x) * (w3 x), silu(a) = a * sigmoid(a).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;
#include "common.glsl"
#include "silu.glsl"
layout(std430, binding = 0) readonly buffer A { float a[]; };  // w1 x
layout(std430, binding = 1) readonly buffer B { float b[]; };  // w3 x
layout(std430, binding = 2) writeonly buffer O { float o[]; };
layout(push_constant) uniform Push { uint n; uint a_first; uint b_first; uint o_first; } p;
void main() {
    const uint i = global_index();
    if (i >= p.n) return;
    o[p.o_first + i] = silu_mul(a[p.a_first + i], b[p.b_first + i]);
}
