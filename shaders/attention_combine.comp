#version 450
// Merges the splits of attention.comp's SPLIT variant, one workgroup per (query t, head h): with M the largest
// split max, out = sum_s exp(m_s - M) acc_s / sum_s exp(m_s - M) l_s, the same online-softmax rescaling that
// joins two blocks inside one workgroup.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 128) in;
#include "common.glsl"
#define WG 128u
layout(std430, binding = 0) readonly buffer Parts { float parts[]; };  // [T, n_heads, n_splits, head_dim + 2]
layout(std430, binding = 1) writeonly buffer O { float o[]; };         // [T, n_heads * head_dim]
layout(push_constant) uniform Push {
    uint T; uint n_heads; uint head_dim; uint n_splits; uint parts_first; uint o_first;
} p;
void main() {
    const uint g = group_index();  // t * n_heads + h
    if (g >= p.T * p.n_heads) return;
    const uint tid = gl_LocalInvocationID.x, stride = p.head_dim + 2u;
    const uint base = p.parts_first + g * p.n_splits * stride;
    float M = uintBitsToFloat(0xFF800000u);
    for (uint s = 0u; s < p.n_splits; ++s) M = max(M, parts[base + s * stride + p.head_dim]);
    float L = 0.0;
    for (uint s = 0u; s < p.n_splits; ++s)
        L += exp(parts[base + s * stride + p.head_dim] - M) * parts[base + s * stride + p.head_dim + 1u];
    for (uint d = tid; d < p.head_dim; d += WG) {
        float acc = 0.0;
        for (uint s = 0u; s < p.n_splits; ++s)
            acc += exp(parts[base + s * stride + p.head_dim] - M) * parts[base + s * stride + d];
        o[p.o_first + g * p.head_dim + d] = acc / L;
    }
}
