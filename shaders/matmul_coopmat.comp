#version 450
// Prefill on matrix units: out[t, n] = dot(w[n, :], x[t, :]) as matmul.comp, the same tiles (64 tokens x 128
// weight rows per workgroup), bindings and push constants, but the products run as 16 x 16 x 16 cooperative
// matrices (VK_NV_cooperative_matrix): binary16 operands, float32 sums. Each BK-deep slice of x and of w is
// rounded to binary16 and staged in shared memory, two to a 32-bit word (a row of the slice is 16 words and one
// 16-byte word of padding); each of the four subgroups (32 invocations) multiplies 32 tokens x 64 rows of it as
// 2 x 4 matrices. At the end each subgroup's matrices go through shared memory, 16 x 16 at a time, to the output,
// so tokens and rows past the edges are not written. Values beyond binary16's range are clamped to +-65504.
//
// Built without COOPMAT_NV (the emulated form), the same staging feeds plain float32 FMAs, each invocation 8
// tokens x 8 rows: it computes what the matrix units compute (products of the same binary16 values, summed in
// float32) on any device, so the tests check the loads, the rounding and the edges on lavapipe; the matrix
// units' own part (loading fragments, multiplying, storing) is checked on the device when the backend loads.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 128) in;
#include "common.glsl"
#if defined(COOPMAT_NV)
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#endif
#define BM 64u   // tokens per tile
#define BN 128u  // weight rows (output features) per tile
#define BK 32u   // depth of one staged slice: 16 words of two binary16 per row
#define ROW_Q 5u // 16-byte words per staged row: 4 of data, 1 of padding (spreads rows over the banks)
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

shared uvec4 xs[BM * ROW_Q];  // token i, depths 8q .. 8q+7 at xs[i * ROW_Q + q]
shared uvec4 ws[BN * ROW_Q];  // weight row i, likewise
#if defined(COOPMAT_NV)
shared float cs[4u * 256u];   // a 16 x 16 result matrix per subgroup on its way out
#endif

uint t0, n0, tid;
bool x_vec, w_vec;  // the 16-byte forms (uniform: they depend on the push constants only)

// Two floats as one word of binary16 (the device's conversion, one instruction where half.glsl's exact rounding
// would cost a dozen per value), clamped to the finite range first.
uint pack2(float a, float b) { return packHalf2x16(clamp(vec2(a, b), -65504.0, 65504.0)); }
void put_x(uint row, uint word, uint v) { xs[row * ROW_Q + word / 4u][word % 4u] = v; }
void put_w(uint row, uint word, uint v) { ws[row * ROW_Q + word / 4u][word % 4u] = v; }

// ---- the next slice, held in registers (as binary16 words) between its loads and its store to shared memory
uint xr[8];   // 1024 words of x per slice: 8 per invocation
uint wr[16];  // 2048 words of w per slice: 16 per invocation

// x: the 16-byte form takes token e / 8, depths 4 (e % 8) .. +3 for e = tid + 128 l (l < 4): two words each;
// otherwise word e % 16 of token e / 16 for e = tid + 128 l (l < 8), two single loads each.
void fetch_x(uint k0) {
    if (x_vec) {
        for (uint l = 0u; l < 4u; ++l) {
            const uint e = tid + 128u * l, t = t0 + e / 8u, k = k0 + 4u * (e % 8u);
            const vec4 v = (t < p.T && k < p.cols) ? x4[(p.x_first + t * p.cols + k) / 4u] : vec4(0.0);
            xr[2u * l] = pack2(v.x, v.y);
            xr[2u * l + 1u] = pack2(v.z, v.w);
        }
    } else {
        for (uint l = 0u; l < 8u; ++l) {
            const uint e = tid + 128u * l, t = t0 + e / 16u, k = k0 + 2u * (e % 16u);
            const bool in_t = t < p.T;
            const float a = (in_t && k < p.cols) ? x[p.x_first + t * p.cols + k] : 0.0;
            const float b = (in_t && k + 1u < p.cols) ? x[p.x_first + t * p.cols + k + 1u] : 0.0;
            xr[l] = pack2(a, b);
        }
    }
}
void stash_x() {
    if (x_vec) {
        for (uint l = 0u; l < 4u; ++l) {
            const uint e = tid + 128u * l;
            put_x(e / 8u, 2u * (e % 8u), xr[2u * l]);
            put_x(e / 8u, 2u * (e % 8u) + 1u, xr[2u * l + 1u]);
        }
    } else {
        for (uint l = 0u; l < 8u; ++l) {
            const uint e = tid + 128u * l;
            put_x(e / 16u, e % 16u, xr[l]);
        }
    }
}

// w: block types a quad (4 weights of one unit: BK is the unit's 32 and cols is whole units) of row e / 8 at
// depth 4 (e % 8), e = tid + 128 l (l < 8); 16-bit types 8 weights (one 16-byte load) of row e / 4 at depth
// 8 (e % 4) (l < 4); f32 4 weights of row e / 8 at depth 4 (e % 8) (l < 8); otherwise pairs, word e % 16 of row
// e / 16 (l < 16).
void fetch_w(uint k0) {
#if defined(WBLOCK)
    for (uint l = 0u; l < 8u; ++l) {
        const uint e = tid + 128u * l, n = n0 + e / 8u, k = k0 + 4u * (e % 8u);
        const vec4 v = (n < p.rows && k < p.cols)
                           ? unit_quad(unit_head(row_byte0(n, p.cols), k / UNIT_ELEMS), (k % UNIT_ELEMS) / 4u)
                           : vec4(0.0);
        wr[2u * l] = pack2(v.x, v.y);
        wr[2u * l + 1u] = pack2(v.z, v.w);
    }
#else
    if (w_vec) {
#if defined(WTYPE_F32)
        for (uint l = 0u; l < 8u; ++l) {
            const uint e = tid + 128u * l, n = n0 + e / 8u, k = k0 + 4u * (e % 8u);
            const vec4 v = (n < p.rows && k < p.cols) ? uintBitsToFloat(w4[(n * p.cols + k) / 4u]) : vec4(0.0);
            wr[2u * l] = pack2(v.x, v.y);
            wr[2u * l + 1u] = pack2(v.z, v.w);
        }
#else
        for (uint l = 0u; l < 4u; ++l) {
            const uint e = tid + 128u * l, n = n0 + e / 4u, k = k0 + 8u * (e % 4u);
            const uvec4 v = (n < p.rows && k < p.cols) ? w4[(n * p.cols + k) / 8u] : uvec4(0u);
#if defined(WTYPE_F16)
            // Already binary16, two to a word in the order the staging wants.
            wr[4u * l] = v.x;
            wr[4u * l + 1u] = v.y;
            wr[4u * l + 2u] = v.z;
            wr[4u * l + 3u] = v.w;
#else
            const vec4 lo = widen_lo(v), hi = widen_hi(v);
            wr[4u * l] = pack2(lo.x, lo.y);
            wr[4u * l + 1u] = pack2(lo.z, lo.w);
            wr[4u * l + 2u] = pack2(hi.x, hi.y);
            wr[4u * l + 3u] = pack2(hi.z, hi.w);
#endif
        }
#endif
    } else {
        for (uint l = 0u; l < 16u; ++l) {
            const uint e = tid + 128u * l, n = n0 + e / 16u, k = k0 + 2u * (e % 16u);
            const bool in_n = n < p.rows;
            const float a = (in_n && k < p.cols) ? weight_at(n * p.cols + k) : 0.0;
            const float b = (in_n && k + 1u < p.cols) ? weight_at(n * p.cols + k + 1u) : 0.0;
            wr[l] = pack2(a, b);
        }
    }
#endif
}
void stash_w() {
#if defined(WBLOCK)
    const bool quads = true, eights = false;
#elif defined(WTYPE_F32)
    const bool quads = w_vec, eights = false;
#else
    const bool quads = false, eights = w_vec;
#endif
    if (quads) {
        for (uint l = 0u; l < 8u; ++l) {
            const uint e = tid + 128u * l;
            put_w(e / 8u, 2u * (e % 8u), wr[2u * l]);
            put_w(e / 8u, 2u * (e % 8u) + 1u, wr[2u * l + 1u]);
        }
    } else if (eights) {
        for (uint l = 0u; l < 4u; ++l) {
            const uint e = tid + 128u * l;
            for (uint c = 0u; c < 4u; ++c) put_w(e / 4u, 4u * (e % 4u) + c, wr[4u * l + c]);
        }
    } else {
        for (uint l = 0u; l < 16u; ++l) {
            const uint e = tid + 128u * l;
            put_w(e / 16u, e % 16u, wr[l]);
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

#if defined(COOPMAT_NV)
    // Subgroup s (of 32 invocations) owns tokens 32 (s / 2) .. +31 and rows 64 (s % 2) .. +63.
    const uint s = gl_SubgroupID, st = 32u * (s / 2u), sn = 64u * (s % 2u);
    fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[2][4];
    for (uint i = 0u; i < 2u; ++i)
        for (uint j = 0u; j < 4u; ++j) acc[i][j] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
#else
    // Invocation tid owns tokens 8 (tid / 16) .. +7 and rows tid % 16 + 16 c (c < 8).
    const uint it = 8u * (tid / 16u), in_ = tid % 16u;
    float acc[8][8];
    for (uint i = 0u; i < 8u; ++i)
        for (uint c = 0u; c < 8u; ++c) acc[i][c] = 0.0;
#endif

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
#if defined(COOPMAT_NV)
        for (uint kk = 0u; kk < BK / 16u; ++kk) {
            // A: 16 tokens x 16 depths, row-major; B: 16 depths x 16 rows, i.e. w's rows column-major. Offsets
            // and strides count 16-byte words (8 binary16).
            fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> a[2];
            for (uint i = 0u; i < 2u; ++i)
                coopMatLoadNV(a[i], xs, (st + 16u * i) * ROW_Q + 2u * kk, ROW_Q, false);
            for (uint j = 0u; j < 4u; ++j) {
                fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> b;
                coopMatLoadNV(b, ws, (sn + 16u * j) * ROW_Q + 2u * kk, ROW_Q, true);
                for (uint i = 0u; i < 2u; ++i) acc[i][j] = coopMatMulAddNV(a[i], b, acc[i][j]);
            }
        }
#else
        for (uint q = 0u; q < BK / 2u; ++q) {
            vec2 a[8], b[8];
            for (uint i = 0u; i < 8u; ++i) a[i] = unpackHalf2x16(xs[(it + i) * ROW_Q + q / 4u][q % 4u]);
            for (uint c = 0u; c < 8u; ++c) b[c] = unpackHalf2x16(ws[(in_ + 16u * c) * ROW_Q + q / 4u][q % 4u]);
            for (uint i = 0u; i < 8u; ++i)
                for (uint c = 0u; c < 8u; ++c) acc[i][c] = fma(a[i].y, b[c].y, fma(a[i].x, b[c].x, acc[i][c]));
        }
#endif
        barrier();  // everyone is done with the slice before the next one overwrites it
    }

#if defined(COOPMAT_NV)
    const uint lane = gl_SubgroupInvocationID;
    for (uint i = 0u; i < 2u; ++i)
        for (uint j = 0u; j < 4u; ++j) {
            coopMatStoreNV(acc[i][j], cs, 256u * s, 16u, false);
            subgroupMemoryBarrierShared();
            subgroupBarrier();
            for (uint r = 0u; r < 8u; ++r) {
                const uint e = lane + 32u * r, t = t0 + st + 16u * i + e / 16u, n = n0 + sn + 16u * j + e % 16u;
                if (t < p.T && n < p.rows) o[p.o_first + t * p.o_stride + n] = cs[256u * s + e];
            }
            subgroupBarrier();  // read before the next matrix overwrites it
        }
#else
    for (uint i = 0u; i < 8u; ++i) {
        const uint t = t0 + it + i;
        if (t >= p.T) continue;
        for (uint c = 0u; c < 8u; ++c) {
            const uint n = n0 + in_ + 16u * c;
            if (n < p.rows) o[p.o_first + t * p.o_stride + n] = acc[i][c];
        }
    }
#endif
}
