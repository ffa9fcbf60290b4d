#version 450
// Prefill: out[t, n] = dot(w[n, :], x[t, :]) for T tokens at once (x @ w^T). A workgroup computes a BM x BN
// tile of the output (64 tokens x 128 weight rows): it stages BK-deep slices of x and of w in shared memory, so
// each weight loaded from memory serves BM tokens and each x value BN rows, and each invocation accumulates a
// 4 x 8 block in registers (float32), reading its operands from shared memory four at a time.
// While one slice is multiplied, the next one is already being loaded into registers (stored to shared memory
// after the barrier), so the loads' latency hides behind the arithmetic. Global loads are 16 bytes wide where the
// layout allows (x: 4 floats; f16/bf16 weights: 8; f32: 4), neighbouring invocations reading neighbouring bytes
// of one row; otherwise one element at a time. Block types (quant.glsl) are staged a quad (4 weights of one
// unit) at a time, widened from their blocks. Tokens, rows and depth past the edges load zeros and are not written.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;  // 16 x 16 invocations, 4 tokens x 8 rows each
#include "common.glsl"
#define BM 64u   // tokens per tile
#define BN 128u  // weight rows (output features) per tile
#define BK 16u   // depth of one staged slice
#define WEIGHTS_BINDING 0
#include "weights.glsl"
layout(std430, binding = 1) readonly buffer X { float x[]; };    // [T, cols]
layout(std430, binding = 1) readonly buffer X4 { vec4 x4[]; };   // the same, 16 bytes at a time
#if defined(WTYPE_F32) || defined(WTYPE_F16) || defined(WTYPE_BF16)
layout(std430, binding = 0) readonly buffer W4 { uvec4 w4[]; };  // the weights, 16 bytes at a time
#endif
layout(std430, binding = 2) writeonly buffer O { float o[]; };  // [T, o_stride]; this dispatch writes columns [0, rows)
layout(push_constant) uniform Push {
    uint T; uint rows; uint cols; uint x_first; uint o_first; uint o_stride; uint tiles_n;
} p;

// k-major; a row of the slice is 4 floats longer than the tile, so it stays 16-byte aligned for the vec4 reads.
shared vec4 xs[BK][BM / 4u + 1u];  // xs[j][i]: depth j, tokens 4i .. 4i+3
shared vec4 ws[BK][BN / 4u + 1u];  // ws[j][i]: depth j, rows 4i .. 4i+3

uint t0, n0, tid;
bool x_vec, w_vec;  // the 16-byte forms (uniform: they depend on the push constants only)

// ---- the next slice, held in registers between its loads and its store to shared memory
vec4 xr[4];  // x: one vec4 (16-byte form) or four single values
vec4 wr[2];  // w: two vec4 of 4 depths (f32), or one uvec4 widened to two vec4 (f16/bf16), or two block quads
float ws_scalar[8];  // w, one element at a time

// x: invocation tid takes token tid / 4, depths 4 (tid % 4) .. +3 (16-byte form), or elements tid + 256 l.
void fetch_x(uint k0) {
    if (x_vec) {
        const uint t = t0 + tid / 4u, k = k0 + 4u * (tid % 4u);
        xr[0] = (t < p.T && k < p.cols) ? x4[(p.x_first + t * p.cols + k) / 4u] : vec4(0.0);
    } else {
        for (uint l = 0u; l < 4u; ++l) {
            const uint e = tid + l * 256u, t = t0 + e / BK, k = k0 + e % BK;
            xr[l].x = (t < p.T && k < p.cols) ? x[p.x_first + t * p.cols + k] : 0.0;
        }
    }
}
void stash_x() {
    if (x_vec) {
        const uint i = tid / 4u, q = tid % 4u;  // token i of the tile, depths 4q .. 4q+3
        for (uint c = 0u; c < 4u; ++c) xs[4u * q + c][i / 4u][i % 4u] = xr[0][c];
    } else {
        for (uint l = 0u; l < 4u; ++l) {
            const uint e = tid + l * 256u, i = e / BK, j = e % BK;
            xs[j][i / 4u][i % 4u] = xr[l].x;
        }
    }
}

void fetch_w(uint k0) {
#if defined(WBLOCK)
    // Row e / 4, depths 4 (e % 4) .. +3 for e = tid, tid + 256: one quad of a unit (BK divides the unit's 32 and
    // cols is whole units), so a unit's scales are decoded once per four weights.
    for (uint l = 0u; l < 2u; ++l) {
        const uint e = tid + l * 256u, n = n0 + e / 4u, k = k0 + 4u * (e % 4u);
        wr[l] = (n < p.rows && k < p.cols)
                    ? unit_quad(unit_head(row_byte0(n, p.cols), k / UNIT_ELEMS), (k % UNIT_ELEMS) / 4u)
                    : vec4(0.0);
    }
#else
    if (w_vec) {
#if defined(WTYPE_F32)
        // Row e / 4, depths 4 (e % 4) .. +3 for e = tid, tid + 256.
        for (uint l = 0u; l < 2u; ++l) {
            const uint e = tid + l * 256u, n = n0 + e / 4u, k = k0 + 4u * (e % 4u);
            wr[l] = (n < p.rows && k < p.cols) ? uintBitsToFloat(w4[(n * p.cols + k) / 4u]) : vec4(0.0);
        }
#else
        // Row tid / 2, depths 8 (tid % 2) .. +7: one 16-byte load of eight 16-bit weights.
        const uint n = n0 + tid / 2u, k = k0 + 8u * (tid % 2u);
        const uvec4 v = (n < p.rows && k < p.cols) ? w4[(n * p.cols + k) / 8u] : uvec4(0u);
        wr[0] = widen_lo(v);
        wr[1] = widen_hi(v);
#endif
    } else {
        for (uint l = 0u; l < 8u; ++l) {
            const uint e = tid + l * 256u, n = n0 + e / BK, k = k0 + e % BK;
            ws_scalar[l] = (n < p.rows && k < p.cols) ? weight_at(n * p.cols + k) : 0.0;
        }
    }
#endif
}
void stash_w() {
#if !defined(WBLOCK)
    if (!w_vec) {
        for (uint l = 0u; l < 8u; ++l) {
            const uint e = tid + l * 256u, i = e / BK, j = e % BK;
            ws[j][i / 4u][i % 4u] = ws_scalar[l];
        }
        return;
    }
#endif
#if defined(WBLOCK) || defined(WTYPE_F32)
    for (uint l = 0u; l < 2u; ++l) {
        const uint e = tid + l * 256u, i = e / 4u, q = e % 4u;
        for (uint c = 0u; c < 4u; ++c) ws[4u * q + c][i / 4u][i % 4u] = wr[l][c];
    }
#else
    const uint i = tid / 2u, h = tid % 2u;
    for (uint c = 0u; c < 4u; ++c) {
        ws[8u * h + c][i / 4u][i % 4u] = wr[0][c];
        ws[8u * h + 4u + c][i / 4u][i % 4u] = wr[1][c];
    }
#endif
}

void main() {
    const uint g = group_index();
    t0 = (g / p.tiles_n) * BM;
    n0 = (g % p.tiles_n) * BN;
    if (t0 >= p.T) return;  // uniform across the workgroup, before any barrier
    tid = gl_LocalInvocationID.x;
    x_vec = p.x_first % 4u == 0u && p.cols % 4u == 0u;
#if defined(WTYPE_F32)
    w_vec = p.cols % 4u == 0u;
#else
    w_vec = p.cols % 8u == 0u;
#endif
    // An invocation owns tokens 4ty .. 4ty+3 and rows 4tx .. 4tx+3 and 64 + 4tx .. 64 + 4tx+3: neighbours read
    // neighbouring vec4 of shared memory and write neighbouring outputs.
    const uint tx = tid % 16u, ty = tid / 16u;
    vec4 acc[4][2];  // acc[i][h][c]: token 4ty + i, row 4tx + 64h + c
    for (uint i = 0u; i < 4u; ++i) {
        acc[i][0] = vec4(0.0);
        acc[i][1] = vec4(0.0);
    }

    fetch_x(0u);
    fetch_w(0u);
    for (uint k0 = 0u; k0 < p.cols; k0 += BK) {
        stash_x();
        stash_w();
        barrier();  // the slice is staged before anyone multiplies
        if (k0 + BK < p.cols) {  // the next slice's loads, in flight while this one is multiplied
            fetch_x(k0 + BK);
            fetch_w(k0 + BK);
        }
        for (uint j = 0u; j < BK; ++j) {
            const vec4 a = xs[j][ty];
            const vec4 b0 = ws[j][tx], b1 = ws[j][tx + 16u];
            for (uint i = 0u; i < 4u; ++i) {
                acc[i][0] += a[i] * b0;
                acc[i][1] += a[i] * b1;
            }
        }
        barrier();  // everyone is done with the slice before the next one overwrites it
    }
    for (uint i = 0u; i < 4u; ++i) {
        const uint t = t0 + 4u * ty + i;
        if (t >= p.T) continue;
        for (uint h = 0u; h < 2u; ++h)
            for (uint c = 0u; c < 4u; ++c) {
                const uint n = n0 + 64u * h + 4u * tx + c;
                if (n < p.rows) o[p.o_first + t * p.o_stride + n] = acc[i][h][c];
            }
    }
}
