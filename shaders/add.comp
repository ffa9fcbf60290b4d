#version 450
// out = a + b, elementwise: the residual connections h = x + attention(...) and out = h + feed_forward(...).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;
#include "common.glsl"
// out may alias a (h = h + f(h)): each invocation reads its element before writing it, so no restrict.
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) writeonly buffer O { float o[]; };
layout(push_constant) uniform Push { uint n; uint a_first; uint b_first; uint o_first; } p;
void main() {
    const uint i = global_index();
    if (i < p.n) o[p.o_first + i] = a[p.a_first + i] + b[p.b_first + i];
}
