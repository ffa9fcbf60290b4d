#version 450
// Decode: out[r] = dot(w[r, :], x), one token. Weights dominate the bytes read, so this kernel is where decode
// speed comes from: each workgroup owns ROWS output rows, its invocations stride along the rows together
// (neighbours read neighbouring words: coalesced), every x element loaded is reused for ROWS rows, and with
// VEC each load is 16 bytes (eight 16-bit or four 32-bit weights). Sums are float32; the workgroup reduces
// them with subgroupAdd and one shared-memory step.
#extension GL_GOOGLE_include_directive : require
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint ROWS = 2;
layout(local_size_x_id = 0) in;
#include "common.glsl"

#ifdef VEC
// cols is a multiple of 8 (16-bit types) or 4 (f32) and x starts on a 16-byte boundary.
layout(std430, binding = 0) readonly restrict buffer Weights { uvec4 w4[]; };
layout(std430, binding = 1) readonly restrict buffer X { vec4 x4[]; };
#include "weights.glsl"
#else
#define WEIGHTS_BINDING 0
#include "weights.glsl"
layout(std430, binding = 1) readonly restrict buffer X { float x[]; };
#endif
layout(std430, binding = 2) writeonly restrict buffer O { float o[]; };
layout(push_constant) uniform Push { uint rows; uint cols; uint x_first; uint o_first; } p;

shared float partial[ROWS * WG];  // [ROWS][subgroup]; WG slots per row cover any subgroup size

void main() {
    const uint row0 = group_index() * ROWS;
    if (row0 >= p.rows) return;  // uniform across the workgroup, before the barrier
    const uint tid = gl_LocalInvocationID.x;
    float acc[ROWS];
    uint base[ROWS];
    for (uint r = 0u; r < ROWS; ++r) {
        acc[r] = 0.0;
        // Rows past the end re-read the last row (no branch in the loop) and are not written.
        base[r] = min(row0 + r, p.rows - 1u);
    }
#ifdef VEC
#if defined(WTYPE_F32)
    const uint per_row = p.cols / 4u;  // 16-byte words per row
    const uint xq = p.x_first / 4u;
    for (uint q = tid; q < per_row; q += WG) {
        const vec4 xv = x4[xq + q];
        for (uint r = 0u; r < ROWS; ++r) acc[r] += dot(uintBitsToFloat(w4[base[r] * per_row + q]), xv);
    }
#else
    const uint per_row = p.cols / 8u;
    const uint xq = p.x_first / 4u;
    for (uint q = tid; q < per_row; q += WG) {
        const vec4 xa = x4[xq + 2u * q], xb = x4[xq + 2u * q + 1u];
        for (uint r = 0u; r < ROWS; ++r) {
            const uvec4 w = w4[base[r] * per_row + q];
            acc[r] += dot(widen_lo(w), xa) + dot(widen_hi(w), xb);
        }
    }
#endif
#else
    for (uint i = tid; i < p.cols; i += WG) {
        const float xi = x[p.x_first + i];
        for (uint r = 0u; r < ROWS; ++r) acc[r] += weight_at(base[r] * p.cols + i) * xi;
    }
#endif
    for (uint r = 0u; r < ROWS; ++r) {
        const float s = subgroupAdd(acc[r]);
        if (subgroupElect()) partial[r * WG + gl_SubgroupID] = s;
    }
    barrier();  // every subgroup's partial sums are in shared memory
    if (tid < ROWS && row0 + tid < p.rows) {
        float s = 0.0;
        for (uint i = 0u; i < gl_NumSubgroups; ++i) s += partial[tid * WG + i];
        o[p.o_first + row0 + tid] = s;
    }
}
