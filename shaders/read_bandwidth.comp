#version 450
// Streams a buffer through 16-byte loads: the device's achievable read bandwidth, which bench puts next to the
// decode rate. The loads feed a value that is only written when it equals a constant it (almost) never
// equals, so the compiler cannot drop them.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;
#include "common.glsl"
layout(std430, binding = 0) readonly buffer Data { uvec4 data[]; };
layout(std430, binding = 1) writeonly buffer Sink { uint sink[]; };
layout(push_constant) uniform Push { uint quads; } p;
void main() {
    const uint stride = gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_WorkGroupSize.x;
    uint acc = 0u;
    for (uint i = global_index(); i < p.quads; i += stride) {
        const uvec4 v = data[i];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9E3779B9u) sink[0] = acc;
}
