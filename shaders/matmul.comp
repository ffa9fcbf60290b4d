#version 450
// Prefill: out[t, n] = dot(w[n, :], x[t, :]) for T tokens at once (x @ w^T). A workgroup computes a BM x BN
// tile of the output: it stages BK-wide slices of x (BM tokens) and of w (BN rows) in shared memory, so each
// weight element loaded from memory serves BM tokens, and each invocation accumulates a 4 x 4 block in
// registers (float32). Rows and columns past the edges load zeros and are not written.
// Block types (quant.glsl) are staged a quad (4 weights of one unit) per invocation, widened from their blocks.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;  // 16 x 16 invocations, 4 x 4 outputs each
#include "common.glsl"
#define BM 64u  // tokens per tile
#define BN 64u  // weight rows (output features) per tile
#define BK 16u  // depth of one staged slice
#define WEIGHTS_BINDING 0
#include "weights.glsl"
layout(std430, binding = 1) readonly buffer X { float x[]; };   // [T, cols]
layout(std430, binding = 2) writeonly buffer O { float o[]; };  // [T, o_stride]; this dispatch writes columns [0, rows)
layout(push_constant) uniform Push {
    uint T; uint rows; uint cols; uint x_first; uint o_first; uint o_stride; uint tiles_n;
} p;

// k-major, padded by one so that the 16 invocations storing one column hit different banks.
shared float xs[BK][BM + 1u];
shared float ws[BK][BN + 1u];

void main() {
    const uint g = group_index();
    const uint t0 = (g / p.tiles_n) * BM, n0 = (g % p.tiles_n) * BN;
    if (t0 >= p.T) return;  // uniform across the workgroup, before any barrier
    const uint tid = gl_LocalInvocationID.x;
    // An invocation owns tokens ty + 16i and rows tx + 16j: neighbours read neighbouring shared words and
    // write neighbouring outputs.
    const uint tx = tid % 16u, ty = tid / 16u;
    float acc[4][4];
    for (uint i = 0u; i < 4u; ++i)
        for (uint j = 0u; j < 4u; ++j) acc[i][j] = 0.0;

    for (uint k0 = 0u; k0 < p.cols; k0 += BK) {
        for (uint l = 0u; l < 4u; ++l) {
            const uint e = tid + l * 256u;
            const uint i = e / BK, j = e % BK;  // tile row, depth
            const uint k = k0 + j;
            const uint t = t0 + i, n = n0 + i;
            xs[j][i] = (t < p.T && k < p.cols) ? x[p.x_first + t * p.cols + k] : 0.0;
#if !defined(WBLOCK)
            ws[j][i] = (n < p.rows && k < p.cols) ? weight_at(n * p.cols + k) : 0.0;
#endif
        }
#if defined(WBLOCK)
        {
            // Block types: invocation tid stages row tid / 4, depth 4 (tid % 4) .. +3, one quad of a unit (BK divides
            // the unit's 32 and cols is whole units), so a unit's scales are decoded once per four weights.
            const uint i = tid / 4u, q = tid % 4u, n = n0 + i, k = k0 + 4u * q;
            vec4 wv = vec4(0.0);
            if (n < p.rows && k < p.cols)
                wv = unit_quad(unit_head(row_byte0(n, p.cols), k / UNIT_ELEMS), (k % UNIT_ELEMS) / 4u);
            for (uint c = 0u; c < 4u; ++c) ws[4u * q + c][i] = wv[c];
        }
#endif
        barrier();  // the slice is staged before anyone multiplies
        for (uint j = 0u; j < BK; ++j) {
            float a[4], b[4];
            for (uint i = 0u; i < 4u; ++i) {
                a[i] = xs[j][ty + 16u * i];
                b[i] = ws[j][tx + 16u * i];
            }
            for (uint i = 0u; i < 4u; ++i)
                for (uint jj = 0u; jj < 4u; ++jj) acc[i][jj] += a[i] * b[jj];
        }
        barrier();  // everyone is done with the slice before the next one overwrites it
    }
    for (uint i = 0u; i < 4u; ++i) {
        const uint t = t0 + ty + 16u * i;
        if (t >= p.T) continue;
        for (uint jj = 0u; jj < 4u; ++jj) {
            const uint n = n0 + tx + 16u * jj;
            if (n < p.rows) o[p.o_first + t * p.o_stride + n] = acc[i][jj];
        }
    }
}
