#version 450
// Prefill: out[t, n] = dot(w[n, :], x[t, :]) for T tokens at once (x @ w^T). A workgroup computes a BM x BN
// tile of the output (64 tokens x 128 weight rows): it stages BK-deep slices of x and of w in shared memory, so
// each weight loaded from memory serves BM tokens and each x value BN rows, and each invocation accumulates a
// 4 x 8 block in registers (float32), reading its operands from shared memory four at a time.
// While one slice is multiplied, the next one is already being loaded into registers (stored to shared memory
// after the barrier), so the loads' latency hides behind the arithmetic. Built with TILE8, 128 invocations share
// the same tile, 8 tokens x 8 rows each (a quarter fewer shared-memory reads per product, twice the loads per
// invocation), and the slices alternate between two buffers in shared memory (25 KiB), so that each needs one
// barrier instead of two; each output is summed in the same order, so the bits are the same.
// Global loads are 16 bytes wide where the layout allows (x: 4 floats; f16/bf16 weights: 8; f32: 4), neighbouring
// invocations reading neighbouring bytes of one row; otherwise one element at a time. Block types (quant.glsl)
// are staged a quad (4 weights of one unit) at a time, widened from their blocks. Tokens, rows and depth past the
// edges load zeros and are not written.
#extension GL_GOOGLE_include_directive : require
#ifdef TILE8
layout(local_size_x = 128) in;  // 16 x 8 invocations, 8 tokens x 8 rows each
#define NI 128u
#define TT 8u  // tokens per invocation
#else
layout(local_size_x = 256) in;  // 16 x 16 invocations, 4 tokens x 8 rows each
#define NI 256u
#define TT 4u
#endif
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
#ifdef TILE8
#define BUFS 2u  // the slice being multiplied, and the next one being stored
#else
#define BUFS 1u
#endif
shared vec4 xs[BUFS][BK][BM / 4u + 1u];  // xs[b][j][i]: depth j, tokens 4i .. 4i+3
shared vec4 ws[BUFS][BK][BN / 4u + 1u];  // ws[b][j][i]: depth j, rows 4i .. 4i+3

uint t0, n0, tid;
bool x_vec, w_vec;  // the 16-byte forms (uniform: they depend on the push constants only)

// ---- the next slice, held in registers between its loads and its store to shared memory
// A slice is BM * BK = 1024 values of x and BN * BK = 2048 weights, shared by the NI invocations.
#define X_VECS (BM * BK / 4u / NI)  // x's vec4 (16-byte form) per invocation
#define X_ONES (BM * BK / NI)       // x's single values per invocation
#define W_VECS (BN * BK / 4u / NI)  // w's vec4 (f32 16-byte loads, block quads, halves of 16-bit loads)
#define W_ONES (BN * BK / NI)       // w's single values
vec4 xr[X_VECS];
float xr_scalar[X_ONES];
vec4 wr[W_VECS];  // f16/bf16: each 16-byte load widened to two vec4 (wr[2l], wr[2l + 1])
float ws_scalar[W_ONES];

// x: for e = tid + NI l, token e / 4, depths 4 (e % 4) .. +3 (16-byte form), or else element e of the slice.
void fetch_x(uint k0) {
    if (x_vec) {
        for (uint l = 0u; l < X_VECS; ++l) {
            const uint e = tid + l * NI, t = t0 + e / 4u, k = k0 + 4u * (e % 4u);
            xr[l] = (t < p.T && k < p.cols) ? x4[(p.x_first + t * p.cols + k) / 4u] : vec4(0.0);
        }
    } else {
        for (uint l = 0u; l < X_ONES; ++l) {
            const uint e = tid + l * NI, t = t0 + e / BK, k = k0 + e % BK;
            xr_scalar[l] = (t < p.T && k < p.cols) ? x[p.x_first + t * p.cols + k] : 0.0;
        }
    }
}
void stash_x(uint b) {
    if (x_vec) {
        for (uint l = 0u; l < X_VECS; ++l) {
            const uint e = tid + l * NI, i = e / 4u, q = e % 4u;  // token i of the tile, depths 4q .. 4q+3
            for (uint c = 0u; c < 4u; ++c) xs[b][4u * q + c][i / 4u][i % 4u] = xr[l][c];
        }
    } else {
        for (uint l = 0u; l < X_ONES; ++l) {
            const uint e = tid + l * NI, i = e / BK, j = e % BK;
            xs[b][j][i / 4u][i % 4u] = xr_scalar[l];
        }
    }
}

void fetch_w(uint k0) {
#if defined(WBLOCK)
    // Row e / 4, depths 4 (e % 4) .. +3 for e = tid + NI l: one quad of a unit (BK divides the unit's 32 and
    // cols is whole units), so a unit's scales are decoded once per four weights.
    for (uint l = 0u; l < W_VECS; ++l) {
        const uint e = tid + l * NI, n = n0 + e / 4u, k = k0 + 4u * (e % 4u);
        wr[l] = (n < p.rows && k < p.cols)
                    ? unit_quad(unit_head(row_byte0(n, p.cols), k / UNIT_ELEMS), (k % UNIT_ELEMS) / 4u)
                    : vec4(0.0);
    }
#else
    if (w_vec) {
#if defined(WTYPE_F32)
        // Row e / 4, depths 4 (e % 4) .. +3 for e = tid + NI l.
        for (uint l = 0u; l < W_VECS; ++l) {
            const uint e = tid + l * NI, n = n0 + e / 4u, k = k0 + 4u * (e % 4u);
            wr[l] = (n < p.rows && k < p.cols) ? uintBitsToFloat(w4[(n * p.cols + k) / 4u]) : vec4(0.0);
        }
#else
        // Row e / 2, depths 8 (e % 2) .. +7 for e = tid + NI l: one 16-byte load of eight 16-bit weights.
        for (uint l = 0u; l < W_VECS / 2u; ++l) {
            const uint e = tid + l * NI, n = n0 + e / 2u, k = k0 + 8u * (e % 2u);
            const uvec4 v = (n < p.rows && k < p.cols) ? w4[(n * p.cols + k) / 8u] : uvec4(0u);
            wr[2u * l] = widen_lo(v);
            wr[2u * l + 1u] = widen_hi(v);
        }
#endif
    } else {
        for (uint l = 0u; l < W_ONES; ++l) {
            const uint e = tid + l * NI, n = n0 + e / BK, k = k0 + e % BK;
            ws_scalar[l] = (n < p.rows && k < p.cols) ? weight_at(n * p.cols + k) : 0.0;
        }
    }
#endif
}
void stash_w(uint b) {
#if !defined(WBLOCK)
    if (!w_vec) {
        for (uint l = 0u; l < W_ONES; ++l) {
            const uint e = tid + l * NI, i = e / BK, j = e % BK;
            ws[b][j][i / 4u][i % 4u] = ws_scalar[l];
        }
        return;
    }
#endif
#if defined(WBLOCK) || defined(WTYPE_F32)
    for (uint l = 0u; l < W_VECS; ++l) {
        const uint e = tid + l * NI, i = e / 4u, q = e % 4u;
        for (uint c = 0u; c < 4u; ++c) ws[b][4u * q + c][i / 4u][i % 4u] = wr[l][c];
    }
#else
    for (uint l = 0u; l < W_VECS / 2u; ++l) {
        const uint e = tid + l * NI, i = e / 2u, h = e % 2u;
        for (uint c = 0u; c < 4u; ++c) {
            ws[b][8u * h + c][i / 4u][i % 4u] = wr[2u * l][c];
            ws[b][8u * h + 4u + c][i / 4u][i % 4u] = wr[2u * l + 1u][c];
        }
    }
#endif
}

// An invocation owns tokens TT ty .. +TT-1 and rows 4tx .. 4tx+3 and 64 + 4tx .. 64 + 4tx+3: neighbours read
// neighbouring vec4 of shared memory and write neighbouring outputs.
uint tx, ty;
vec4 acc[TT][2];  // acc[i][h][c]: token TT ty + i, row 4tx + 64h + c

// The staged slice in buffer b into the sums, one depth at a time.
void multiply(uint b) {
    for (uint j = 0u; j < BK; ++j) {
        vec4 a[TT / 4u];
        for (uint v = 0u; v < TT / 4u; ++v) a[v] = xs[b][j][(TT / 4u) * ty + v];
        const vec4 b0 = ws[b][j][tx], b1 = ws[b][j][tx + 16u];
        for (uint i = 0u; i < TT; ++i) {
            acc[i][0] += a[i / 4u][i % 4u] * b0;
            acc[i][1] += a[i / 4u][i % 4u] * b1;
        }
    }
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
    tx = tid % 16u;
    ty = tid / 16u;
    for (uint i = 0u; i < TT; ++i) {
        acc[i][0] = vec4(0.0);
        acc[i][1] = vec4(0.0);
    }

    fetch_x(0u);
    fetch_w(0u);
#ifdef TILE8
    // Slice s is multiplied from buffer s % 2 while slice s + 1 is loaded and then stored into the other. One
    // barrier per slice: it makes the next slice visible, and the other buffer was last read before the one
    // before it.
    stash_x(0u);
    stash_w(0u);
    barrier();
    uint cur = 0u;
    for (uint k0 = 0u; k0 < p.cols; k0 += BK, cur ^= 1u) {
        const bool more = k0 + BK < p.cols;
        if (more) {  // the next slice's loads, in flight while this one is multiplied
            fetch_x(k0 + BK);
            fetch_w(k0 + BK);
        }
        multiply(cur);
        if (more) {
            stash_x(cur ^ 1u);
            stash_w(cur ^ 1u);
        }
        barrier();
    }
#else
    for (uint k0 = 0u; k0 < p.cols; k0 += BK) {
        stash_x(0u);
        stash_w(0u);
        barrier();  // the slice is staged before anyone multiplies
        if (k0 + BK < p.cols) {  // the next slice's loads, in flight while this one is multiplied
            fetch_x(k0 + BK);
            fetch_w(k0 + BK);
        }
        multiply(0u);
        barrier();  // everyone is done with the slice before the next one overwrites it
    }
#endif
    for (uint i = 0u; i < TT; ++i) {
        const uint t = t0 + TT * ty + i;
        if (t >= p.T) continue;
        for (uint h = 0u; h < 2u; ++h)
            for (uint c = 0u; c < 4u; ++c) {
                const uint n = n0 + 64u * h + 4u * tx + c;
                if (n < p.rows) o[p.o_first + t * p.o_stride + n] = acc[i][h][c];
            }
    }
}
