#version 450
// Weight-streaming product for decode and short prompts: out[t, r] = dot(w[r, :], x[t, :]) for NT tokens at a
// time. Weights dominate the bytes read, so this kernel is where decode speed comes from: each workgroup owns
// ROWS output rows of NT tokens, its invocations stride along the rows together (neighbours read neighbouring
// words: coalesced), every weight loaded serves NT tokens and every x element ROWS rows, and with VEC each load
// is 16 bytes (eight 16-bit or four 32-bit weights). Sums are float32 and reduced with subgroupAdd; only a
// workgroup of several subgroups needs one shared-memory step (and its barrier). With ACCUMULATE the product is
// added to what o holds (out += w x: the residual add fused into wo and w2, one dispatch and barrier fewer each).
#extension GL_GOOGLE_include_directive : require
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint ROWS = 2;
layout(constant_id = 2) const uint NT = 1;
layout(local_size_x_id = 0) in;
#include "common.glsl"

#if !defined(WTYPE_F32) && !defined(WTYPE_F16) && !defined(WTYPE_BF16)
// A GGUF block type: the weights as 32-bit words, read a unit (32 weights) at a time by quant.glsl. With VEC,
// x starts on a 16-byte boundary (cols is a multiple of 32 for every block type).
#define WEIGHTS_BINDING 0
#include "weights.glsl"
#ifdef VEC
layout(std430, binding = 1) readonly restrict buffer X { vec4 x4[]; };
#else
layout(std430, binding = 1) readonly restrict buffer X { float x[]; };
#endif
#elif defined(VEC)
// cols is a multiple of 8 (16-bit types) or 4 (f32) and x starts on a 16-byte boundary.
layout(std430, binding = 0) readonly restrict buffer Weights { uvec4 w4[]; };
layout(std430, binding = 1) readonly restrict buffer X { vec4 x4[]; };
#include "weights.glsl"
#else
#define WEIGHTS_BINDING 0
#include "weights.glsl"
layout(std430, binding = 1) readonly restrict buffer X { float x[]; };
#endif
#ifdef ACCUMULATE
layout(std430, binding = 2) restrict buffer O { float o[]; };
#define STORE(i, s) o[i] = o[i] + (s)
#else
layout(std430, binding = 2) writeonly restrict buffer O { float o[]; };
#define STORE(i, s) o[i] = (s)
#endif
layout(push_constant) uniform Push {
    uint rows; uint cols; uint T; uint x_first; uint o_first; uint o_stride; uint row_groups;
} p;

shared float partial[ROWS * NT * WG];  // [ROWS * NT][subgroup]; WG slots cover any subgroup size

void main() {
    const uint g = group_index();
    const uint row0 = (g % p.row_groups) * ROWS, t0 = (g / p.row_groups) * NT;
    if (t0 >= p.T) return;  // uniform across the workgroup, before the barrier
    const uint tid = gl_LocalInvocationID.x;
    float acc[ROWS * NT];  // [row][token]
    uint wrow[ROWS], xrow[NT];
    for (uint r = 0u; r < ROWS; ++r) wrow[r] = min(row0 + r, p.rows - 1u);  // past the end: re-read, not written
    for (uint t = 0u; t < NT; ++t) xrow[t] = min(t0 + t, p.T - 1u);
    for (uint i = 0u; i < ROWS * NT; ++i) acc[i] = 0.0;
#if defined(WBLOCK)
    // Invocations stride over the units (32 weights) of the rows; a unit is widened once into registers and
    // serves the NT tokens, every x load serves the ROWS rows.
    const uint units = p.cols / UNIT_ELEMS;
    const uint row_bytes = row_byte0(1u, p.cols);
    for (uint u = tid; u < units; u += WG) {
        vec4 w[ROWS * 8u];  // [row][quad]
        for (uint r = 0u; r < ROWS; ++r) {
            vec4 wr[8];
            unit_weights(unit_head(wrow[r] * row_bytes, u), wr);
            for (uint k = 0u; k < 8u; ++k) w[r * 8u + k] = wr[k];
        }
        for (uint t = 0u; t < NT; ++t) {
            const uint xi = p.x_first + xrow[t] * p.cols + u * UNIT_ELEMS;
            for (uint k = 0u; k < 8u; ++k) {
#ifdef VEC
                const vec4 xv = x4[xi / 4u + k];
#else
                const vec4 xv = vec4(x[xi + 4u * k], x[xi + 4u * k + 1u], x[xi + 4u * k + 2u], x[xi + 4u * k + 3u]);
#endif
                for (uint r = 0u; r < ROWS; ++r) acc[r * NT + t] += dot(w[r * 8u + k], xv);
            }
        }
    }
#elif defined(VEC)
#if defined(WTYPE_F32)
    const uint per_row = p.cols / 4u;  // 16-byte words per row
    const uint xq = p.x_first / 4u;
    for (uint q = tid; q < per_row; q += WG) {
        vec4 w[ROWS];
        for (uint r = 0u; r < ROWS; ++r) w[r] = uintBitsToFloat(w4[wrow[r] * per_row + q]);
        for (uint t = 0u; t < NT; ++t) {
            const vec4 xv = x4[xq + xrow[t] * per_row + q];
            for (uint r = 0u; r < ROWS; ++r) acc[r * NT + t] += dot(w[r], xv);
        }
    }
#else
    const uint per_row = p.cols / 8u;
    const uint xq = p.x_first / 4u;
    for (uint q = tid; q < per_row; q += WG) {
        vec4 wa[ROWS], wb[ROWS];
        for (uint r = 0u; r < ROWS; ++r) {
            const uvec4 w = w4[wrow[r] * per_row + q];
            wa[r] = widen_lo(w);
            wb[r] = widen_hi(w);
        }
        for (uint t = 0u; t < NT; ++t) {
            const uint xi = xq + xrow[t] * 2u * per_row + 2u * q;
            const vec4 xa = x4[xi], xb = x4[xi + 1u];
            for (uint r = 0u; r < ROWS; ++r) acc[r * NT + t] += dot(wa[r], xa) + dot(wb[r], xb);
        }
    }
#endif
#else
    for (uint i = tid; i < p.cols; i += WG) {
        float w[ROWS];
        for (uint r = 0u; r < ROWS; ++r) w[r] = weight_at(wrow[r] * p.cols + i);
        for (uint t = 0u; t < NT; ++t) {
            const float xi = x[p.x_first + xrow[t] * p.cols + i];
            for (uint r = 0u; r < ROWS; ++r) acc[r * NT + t] += w[r] * xi;
        }
    }
#endif
    if (gl_NumSubgroups == 1u) {
        // One subgroup holds the whole workgroup: its sums are complete, no barrier needed.
        for (uint i = 0u; i < ROWS * NT; ++i) {
            const float s = subgroupAdd(acc[i]);
            const uint r = i / NT, t = i % NT;
            if (subgroupElect() && row0 + r < p.rows && t0 + t < p.T)
                STORE(p.o_first + (t0 + t) * p.o_stride + row0 + r, s);
        }
        return;
    }
    for (uint i = 0u; i < ROWS * NT; ++i) {
        const float s = subgroupAdd(acc[i]);
        if (subgroupElect()) partial[i * WG + gl_SubgroupID] = s;
    }
    barrier();  // every subgroup's partial sums are in shared memory
    for (uint i = tid; i < ROWS * NT; i += WG) {
        const uint r = i / NT, t = i % NT;
        if (row0 + r >= p.rows || t0 + t >= p.T) continue;
        float s = 0.0;
        for (uint j = 0u; j < gl_NumSubgroups; ++j) s += partial[i * WG + j];
        STORE(p.o_first + (t0 + t) * p.o_stride + row0 + r, s);
    }
}
