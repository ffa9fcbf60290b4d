#version 450
// Weight-streaming product for decode and short prompts: out[t, r] = dot(w[r, :], x[t, :]) for NT tokens at a
// time. Weights dominate the bytes read, so this kernel is where decode speed comes from: each workgroup owns
// ROWS output rows of NT tokens, its invocations stride along the rows together (neighbours read neighbouring
// words: coalesced), every weight loaded serves NT tokens and every x element ROWS rows, and with VEC each load
// is 16 bytes (eight 16-bit or four 32-bit weights). Sums are float32 and reduced with subgroupAdd; only a
// workgroup of several subgroups needs one shared-memory step (and its barrier).
// Epilogues, each saving a dispatch and a barrier on the decode path (every sum is computed exactly as without
// them, so the results equal the unfused ops' bit for bit):
//   ACCUMULATE  out += w x: the residual add fused into wo and w2.
//   NORM        ACCUMULATE, then RMSNorm of the new rows (norm.glsl, as rmsnorm.comp computes it) into binding 4
//               with the gain at binding 3 (its type in gain_type): the workgroup that finishes last (a counter
//               at binding 5, which it sets back to 0) normalizes them. The norm after wo (ffn_norm) and after
//               w2 (the next layer's attention_norm, or the final norm). One token group (T <= NT), one dimension
//               of workgroups: the host checks.
//   SWIGLU      out = silu(w1 x) * (w3 x): w3 bound second (binding 3); the workgroup sums ROWS rows of each.
//   ROPE        out = the rows rotated as rope.comp does (xq, xk): a pair (2i, 2i+1) is two rows of one
//               workgroup (ROWS even, the chunk's first row even: the host checks), cos and sin from its table.
//   QK          ROPE over two matrices in one dispatch: wq (binding 0, out at 2) and wk (binding 4, out at 5),
//               the first row_groups workgroups wq's rows, the next row_groups_b wk's; each as ROPE alone.
//   QKV         QK and a third matrix, wv (binding 6, out at 7; the next row_groups_c workgroups), stored as
//               it is: attention's three projections of x in one dispatch.
//   KV_F16      QK (or QKV) with wk's (and wv's) rows in binary16 pairs as OUT_F16 writes them (a KV cache in
//               binary16); q stays float32. o_first_b and o_first_c count words.
//   OUT_F16     out in binary16, rows 2i and 2i+1 packed into word i as pack_f16.comp does (half.glsl): the new
//               rows of a KV cache in binary16, with ROPE (xk) or plain (xv); o_first counts words, o_stride
//               elements; pairs of rows as ROPE's.
#extension GL_GOOGLE_include_directive : require
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint ROWS = 2;
layout(constant_id = 2) const uint NT = 1;
layout(local_size_x_id = 0) in;
// Block types (constant 3 is quant.glsl's): QUAD_LANES puts neighbouring pieces of a row (quant.glsl: 32 weights
// of Q4_K or Q6_K whose quants lie together; with 16-byte x loads) or else the eight quads (4 weights each) of a
// unit on neighbouring invocations, so that a subgroup's loads of quants and of x cover neighbouring bytes (a
// GPU's coalesced access); false gives each invocation whole units (a CPU device's lanes, which pay for each
// scale).
layout(constant_id = 4) const bool QUAD_LANES = false;
// Float types with 16-byte loads (VEC): each invocation loads the weights of LOADS of its iterations before it
// sums any of them, so that LOADS loads per row are in flight at once (a GPU's memory hides its latency behind
// many loads, not behind the arithmetic between them). The sums then run in the order one iteration at a time
// takes, so LOADS changes no bit.
layout(constant_id = 5) const uint LOADS = 1;
#include "common.glsl"

#if defined(QK) && (!defined(ROPE) || defined(OUT_F16) || defined(SWIGLU))
#error "QK is ROPE's two-matrix form, float32 out"
#endif
#if defined(QKV) && !defined(QK)
#error "QKV is QK with wv"
#endif
#if defined(KV_F16) && !defined(QK)
#error "KV_F16 is QK's (or QKV's) binary16 cache rows"
#endif
#if defined(NORM) && !defined(ACCUMULATE)
#error "NORM follows ACCUMULATE's residual add"
#endif
#ifdef QK
#define WEIGHTS_B_BINDING 4  // wk; w_sel (weights.glsl) is set once per workgroup
#endif
#ifdef QKV
#define WEIGHTS_C_BINDING 6  // wv
#endif
#ifdef SWIGLU
#define WEIGHTS_B_BINDING 3
#define WROWS (2u * ROWS)  // sums kept: ROWS rows of w1, then the same rows of w3
#define SELECT(r) w_sel = (r) / ROWS
#else
#define WROWS ROWS
#define SELECT(r)
#endif

#if !defined(WTYPE_F32) && !defined(WTYPE_F16) && !defined(WTYPE_BF16)
// A GGUF block type: the weights as 32-bit words, read a unit (32 weights) at a time by quant.glsl. With VEC,
// x starts on a 16-byte boundary (cols is a multiple of 32 for every block type), and Q4_K's quants are also
// read 16 bytes at a time.
#define WEIGHTS_BINDING 0
#if defined(VEC)
#define MATVEC_PIECES 1  // quant.glsl's pieces (Q4_K, Q6_K)
#if defined(WTYPE_Q4_K)
#define WEIGHTS_WORDS4 1
#endif
#endif
#include "weights.glsl"
#ifdef VEC
layout(std430, binding = 1) readonly restrict buffer X { vec4 x4[]; };
#else
layout(std430, binding = 1) readonly restrict buffer X { float x[]; };
#endif
#elif defined(VEC)
// cols is a multiple of 8 (16-bit types) or 4 (f32) and x starts on a 16-byte boundary.
layout(std430, binding = 0) readonly restrict buffer Weights { uvec4 w4[]; };
#ifdef SWIGLU
layout(std430, binding = 3) readonly restrict buffer WeightsB { uvec4 wb4[]; };
#define W4(r, i) ((r) < ROWS ? w4[i] : wb4[i])
#elif defined(QK)
layout(std430, binding = WEIGHTS_B_BINDING) readonly restrict buffer WeightsB { uvec4 wb4[]; };
uint w_sel = 0u;
#ifdef QKV
layout(std430, binding = WEIGHTS_C_BINDING) readonly restrict buffer WeightsC { uvec4 wc4[]; };
#define W4(r, i) (w_sel == 0u ? w4[i] : w_sel == 1u ? wb4[i] : wc4[i])
#else
#define W4(r, i) (w_sel == 0u ? w4[i] : wb4[i])
#endif
#else
#define W4(r, i) w4[i]
#endif
layout(std430, binding = 1) readonly restrict buffer X { vec4 x4[]; };
#include "weights.glsl"
#else
#define WEIGHTS_BINDING 0
#include "weights.glsl"
layout(std430, binding = 1) readonly restrict buffer X { float x[]; };
#endif
#ifdef OUT_F16
layout(std430, binding = 2) writeonly restrict buffer O { uint o[]; };
#include "half.glsl"
#elif defined(ACCUMULATE) && defined(NORM)
// coherent: the last workgroup reads every other workgroup's rows, past any cache that is not shared.
layout(std430, binding = 2) coherent restrict buffer O { float o[]; };
#define STORE(i, s) o[i] = o[i] + (s)
layout(std430, binding = 3) readonly restrict buffer Gain { uint gain_words[]; };  // [rows], gain_type
layout(std430, binding = 4) writeonly restrict buffer N { float xn[]; };          // [T, rows]
layout(std430, binding = 5) coherent restrict buffer Count { uint norm_count; };
#define NORM_X(i) o[i]
#include "norm.glsl"
shared uint norm_last;
// Element i of the gain, widened as weights.glsl widens its type (0 f32, 1 f16, 2 bf16; all exact).
float gain_at(uint i, uint type) {
    if (type == 0u) return uintBitsToFloat(gain_words[i]);
    return type == 1u ? f16_element(gain_words[i >> 1], i) : bf16_element(gain_words[i >> 1], i);
}
#elif defined(ACCUMULATE)
layout(std430, binding = 2) restrict buffer O { float o[]; };
#define STORE(i, s) o[i] = o[i] + (s)
#else
layout(std430, binding = 2) writeonly restrict buffer O { float o[]; };
#define STORE(i, s) o[i] = (s)
#endif
#ifdef SWIGLU
#include "silu.glsl"
#endif
#ifdef ROPE
#include "rotary.glsl"
layout(std430, binding = 3) readonly restrict buffer Table { float table[]; };  // [positions, half_dim, (cos, sin)]
#endif
#ifdef KV_F16
#include "half.glsl"
#define KV_WORD uint  // wk's and wv's rows in binary16 pairs
#else
#define KV_WORD float
#endif
#ifdef QK
layout(std430, binding = 5) writeonly restrict buffer OB { KV_WORD ob[]; };  // wk's rows
#endif
#ifdef QKV
layout(std430, binding = 7) writeonly restrict buffer OC { KV_WORD oc[]; };  // wv's rows
#endif
layout(push_constant) uniform Push {
    uint rows; uint cols; uint T; uint x_first; uint o_first; uint o_stride; uint row_groups;
#ifdef ROPE
    uint row_base;     // the chunk's first row in the whole matrix (even)
    uint half_dim;     // head_dim / 2
    uint table_first;  // the table entry of token 0's pair 0
#endif
#ifdef QK
    uint rows_b; uint row_groups_b; uint o_first_b; uint o_stride_b;  // wk's, as rows .. row_groups and o_* wq's
#endif
#ifdef QKV
    uint rows_c; uint row_groups_c; uint o_first_c; uint o_stride_c;  // wv's
#endif
#ifdef NORM
    uint gain_type; uint n_first; float eps;  // the norm's gain type, its output's first element, its epsilon
#endif
} p;

shared float partial[WROWS * NT * WG];  // [WROWS * NT][subgroup]; WG slots cover any subgroup size

void main() {
    const uint g = group_index();
#ifdef QK
    // The matrix this workgroup reads (uniform across it): wq's row groups, then wk's (then wv's).
    uint groups = p.row_groups + p.row_groups_b, rows = p.rows, o_first = p.o_first, o_stride = p.o_stride;
#ifdef QKV
    groups += p.row_groups_c;
#endif
    uint gr = g % groups;
    if (gr >= p.row_groups) {
        gr -= p.row_groups;
        w_sel = 1u, rows = p.rows_b, o_first = p.o_first_b, o_stride = p.o_stride_b;
#ifdef QKV
        if (gr >= p.row_groups_b) gr -= p.row_groups_b, w_sel = 2u, rows = p.rows_c, o_first = p.o_first_c,
                                                         o_stride = p.o_stride_c;
#endif
    }
    const uint row0 = gr * ROWS, t0 = (g / groups) * NT;
#else
    const uint rows = p.rows, o_first = p.o_first, o_stride = p.o_stride;
    const uint row0 = (g % p.row_groups) * ROWS, t0 = (g / p.row_groups) * NT;
#endif
#ifndef NORM
    if (t0 >= p.T) return;  // uniform across the workgroup, before the barrier
#endif
    const uint tid = gl_LocalInvocationID.x;
    float acc[WROWS * NT];  // [row][token]
    uint wrow[WROWS], xrow[NT];
    // Past the end: re-read, not written.
    for (uint r = 0u; r < WROWS; ++r) wrow[r] = min(row0 + r % ROWS, rows - 1u);
    for (uint t = 0u; t < NT; ++t) xrow[t] = min(t0 + t, p.T - 1u);
    for (uint i = 0u; i < WROWS * NT; ++i) acc[i] = 0.0;
#if defined(WBLOCK)
    // Invocations stride over the units (32 weights) of the rows. A unit's quants are widened once into registers
    // and serve the NT tokens, every x load serves the ROWS rows; the scale and offset (w = a q + b) are applied
    // once per half unit: a * sum(q x) + b * sum(x), the sum of x shared by the rows.
#ifdef UNIT_ONE_SCALE
#define HALVES 1u
#else
#define HALVES 2u
#endif
    const uint units = p.cols / UNIT_ELEMS;
    const uint row_bytes = row_byte0(1u, p.cols);
#if defined(PIECES) && defined(VEC)
    // Q4_K and Q6_K: piece e (32 weights whose quants lie together; quant.glsl) on invocation e (mod WG).
    for (uint e = tid; QUAD_LANES && e < units; e += WG) {
        Piece pc[WROWS];
        for (uint r = 0u; r < WROWS; ++r) {
            SELECT(r);
            pc[r] = piece_at(wrow[r] * row_bytes, e);
        }
        for (uint t = 0u; t < NT; ++t) {
            const uint x0 = p.x_first + xrow[t] * p.cols;
            vec4 xv[8];
            vec4 xs = vec4(0.0);  // each group's sum of x
            for (uint g = 0u; g < PIECE_GROUPS; ++g) {
                const uint xq = (x0 + piece_group_first(e, g)) / 4u;
                for (uint i = 0u; i < PIECE_GROUP_QUADS; ++i) {
                    xv[g * PIECE_GROUP_QUADS + i] = x4[xq + i];
                    xs[g] += dot(x4[xq + i], vec4(1.0));
                }
            }
            for (uint r = 0u; r < WROWS; ++r) acc[r * NT + t] += piece_dot(pc[r], xv, xs);
        }
    }
#else
    // Quad k of unit u on invocation 8u + k (mod WG): each works out the unit's scale and offset itself (the
    // eight read the same words) and applies them to its own sums of q x and of x.
    for (uint e = tid; QUAD_LANES && e < units * 8u; e += WG) {
        const uint u = e >> 3u, k = e & 7u;
        vec4 q[WROWS];
        vec2 ab[WROWS];
        for (uint r = 0u; r < WROWS; ++r) {
            SELECT(r);
            const UnitHead h = unit_head(wrow[r] * row_bytes, u);
            q[r] = unit_quad_raw(h, k);
            ab[r] = unit_scale(h, k >> 2u);
        }
        for (uint t = 0u; t < NT; ++t) {
            const uint xi = p.x_first + xrow[t] * p.cols + u * UNIT_ELEMS + 4u * k;
#ifdef VEC
            const vec4 xv = x4[xi / 4u];
#else
            const vec4 xv = vec4(x[xi], x[xi + 1u], x[xi + 2u], x[xi + 3u]);
#endif
#ifdef UNIT_NO_OFFSET
            for (uint r = 0u; r < WROWS; ++r) acc[r * NT + t] += ab[r].x * dot(q[r], xv);
#else
            const float sx = dot(xv, vec4(1.0));
            for (uint r = 0u; r < WROWS; ++r) acc[r * NT + t] += ab[r].x * dot(q[r], xv) + ab[r].y * sx;
#endif
        }
    }
#endif
    for (uint u = tid; !QUAD_LANES && u < units; u += WG) {
        vec4 q[WROWS * 8u];       // [row][quad]
        vec2 ab[WROWS * HALVES];  // [row][half]: (a, b)
        for (uint r = 0u; r < WROWS; ++r) {
            vec4 qr[8];
            SELECT(r);
            const UnitHead h = unit_head(wrow[r] * row_bytes, u);
            unit_quants(h, qr);
            for (uint k = 0u; k < 8u; ++k) q[r * 8u + k] = qr[k];
            for (uint hh = 0u; hh < HALVES; ++hh) ab[r * HALVES + hh] = unit_scale(h, hh);
        }
        for (uint t = 0u; t < NT; ++t) {
            const uint xi = p.x_first + xrow[t] * p.cols + u * UNIT_ELEMS;
            float sq[WROWS * HALVES];  // [row][half]: sum of q x
            for (uint i = 0u; i < WROWS * HALVES; ++i) sq[i] = 0.0;
            vec4 sx[HALVES];  // [half]: the sum of x, four lanes
            for (uint hh = 0u; hh < HALVES; ++hh) sx[hh] = vec4(0.0);
            for (uint k = 0u; k < 8u; ++k) {
#ifdef VEC
                const vec4 xv = x4[xi / 4u + k];
#else
                const vec4 xv = vec4(x[xi + 4u * k], x[xi + 4u * k + 1u], x[xi + 4u * k + 2u], x[xi + 4u * k + 3u]);
#endif
                const uint hh = (HALVES == 2u && k >= 4u) ? 1u : 0u;
#ifndef UNIT_NO_OFFSET
                sx[hh] += xv;
#endif
                for (uint r = 0u; r < WROWS; ++r) sq[r * HALVES + hh] += dot(q[r * 8u + k], xv);
            }
            for (uint r = 0u; r < WROWS; ++r)
                for (uint hh = 0u; hh < HALVES; ++hh) {
                    const vec2 s = ab[r * HALVES + hh];
#ifdef UNIT_NO_OFFSET
                    acc[r * NT + t] += s.x * sq[r * HALVES + hh];
#else
                    acc[r * NT + t] += s.x * sq[r * HALVES + hh] + s.y * dot(sx[hh], vec4(1.0));
#endif
                }
        }
    }
#elif defined(VEC)
#if defined(WTYPE_F32)
    const uint per_row = p.cols / 4u;  // 16-byte words per row
    const uint xq = p.x_first / 4u;
    for (uint q0 = tid; q0 < per_row; q0 += LOADS * WG) {
        vec4 w[LOADS * WROWS];  // [load][row]; a load past the row's end reads its last word, not summed
        for (uint j = 0u; j < LOADS; ++j)
            for (uint r = 0u; r < WROWS; ++r)
                w[j * WROWS + r] = uintBitsToFloat(W4(r, wrow[r] * per_row + min(q0 + j * WG, per_row - 1u)));
        for (uint j = 0u; j < LOADS && q0 + j * WG < per_row; ++j) {
            const uint q = q0 + j * WG;
            for (uint t = 0u; t < NT; ++t) {
                const vec4 xv = x4[xq + xrow[t] * per_row + q];
                for (uint r = 0u; r < WROWS; ++r) acc[r * NT + t] += dot(w[j * WROWS + r], xv);
            }
        }
    }
#else
    const uint per_row = p.cols / 8u;
    const uint xq = p.x_first / 4u;
    for (uint q0 = tid; q0 < per_row; q0 += LOADS * WG) {
        uvec4 w[LOADS * WROWS];  // [load][row]; a load past the row's end reads its last word, not summed
        for (uint j = 0u; j < LOADS; ++j)
            for (uint r = 0u; r < WROWS; ++r)
                w[j * WROWS + r] = W4(r, wrow[r] * per_row + min(q0 + j * WG, per_row - 1u));
        for (uint j = 0u; j < LOADS && q0 + j * WG < per_row; ++j) {
            const uint q = q0 + j * WG;
            vec4 wa[WROWS], wb[WROWS];
            for (uint r = 0u; r < WROWS; ++r) {
                wa[r] = widen_lo(w[j * WROWS + r]);
                wb[r] = widen_hi(w[j * WROWS + r]);
            }
            for (uint t = 0u; t < NT; ++t) {
                const uint xi = xq + xrow[t] * 2u * per_row + 2u * q;
                const vec4 xa = x4[xi], xb = x4[xi + 1u];
                for (uint r = 0u; r < WROWS; ++r) acc[r * NT + t] += dot(wa[r], xa) + dot(wb[r], xb);
            }
        }
    }
#endif
#else
    for (uint i = tid; i < p.cols; i += WG) {
        float w[WROWS];
        for (uint r = 0u; r < WROWS; ++r) {
            SELECT(r);
            w[r] = weight_at(wrow[r] * p.cols + i);
        }
        for (uint t = 0u; t < NT; ++t) {
            const float xi = x[p.x_first + xrow[t] * p.cols + i];
            for (uint r = 0u; r < WROWS; ++r) acc[r * NT + t] += w[r] * xi;
        }
    }
#endif
    // The finished sums. One subgroup holds the whole workgroup: subgroupAdd completes them, no barrier needed
    // and one elected invocation writes. Otherwise each subgroup's share goes through shared memory.
    float s[WROWS * NT];
    const bool one = gl_NumSubgroups == 1u;
    bool writes = true;
    if (one) {
        for (uint i = 0u; i < WROWS * NT; ++i) s[i] = subgroupAdd(acc[i]);
        writes = subgroupElect();
#ifndef NORM
        if (!writes) return;
#endif
    } else {
        for (uint i = 0u; i < WROWS * NT; ++i) {
            const float v = subgroupAdd(acc[i]);
            if (subgroupElect()) partial[i * WG + gl_SubgroupID] = v;
        }
        barrier();  // every subgroup's partial sums are in shared memory
        for (uint i = 0u; i < WROWS * NT; ++i) {
            s[i] = 0.0;
            for (uint j = 0u; j < gl_NumSubgroups; ++j) s[i] += partial[i * WG + j];
        }
    }
    const uint first = one ? (writes ? 0u : ROWS * NT) : tid, stride = one ? 1u : WG;
#ifdef QKV
    if (w_sel == 2u) {  // wv's rows, stored as they are
#ifdef KV_F16
        for (uint i = first; i < (ROWS / 2u) * NT; i += stride) {
            const uint r = 2u * (i / NT), t = i % NT, e = (t0 + t) * o_stride + row0 + r;
            if (row0 + r >= rows || t0 + t >= p.T) continue;  // rows come in whole pairs
            oc[o_first + e / 2u] = half_pair(s[r * NT + t], s[(r + 1u) * NT + t]);
        }
#else
        for (uint i = first; i < ROWS * NT; i += stride) {
            const uint r = i / NT, t = i % NT;
            if (row0 + r < rows && t0 + t < p.T) oc[o_first + (t0 + t) * o_stride + row0 + r] = s[i];
        }
#endif
        return;
    }
#endif
#ifdef ROPE
    // One item per pair of rows and token.
    for (uint i = first; i < (ROWS / 2u) * NT; i += stride) {
        // e: the pair's first element in the output; a binary16 output's word e / 2 holds the pair.
        const uint r = 2u * (i / NT), t = i % NT, e = (t0 + t) * o_stride + row0 + r;
        if (row0 + r >= rows || t0 + t >= p.T) continue;  // rows come in whole pairs
        const uint pair = ((p.row_base + row0 + r) / 2u) % p.half_dim;
        const uint c = p.table_first + 2u * ((t0 + t) * p.half_dim + pair);
        const vec2 v = rotate_pair(s[r * NT + t], s[(r + 1u) * NT + t], table[c], table[c + 1u]);
#ifdef OUT_F16
        o[o_first + e / 2u] = half_pair(v.x, v.y);
#else
#ifdef QK
        if (w_sel == 1u) {
#ifdef KV_F16
            ob[o_first + e / 2u] = half_pair(v.x, v.y);
#else
            ob[o_first + e] = v.x;
            ob[o_first + e + 1u] = v.y;
#endif
            continue;
        }
#endif
        o[o_first + e] = v.x;
        o[o_first + e + 1u] = v.y;
#endif
    }
#elif defined(OUT_F16)
    for (uint i = first; i < (ROWS / 2u) * NT; i += stride) {
        const uint r = 2u * (i / NT), t = i % NT, e = (t0 + t) * o_stride + row0 + r;
        if (row0 + r >= rows || t0 + t >= p.T) continue;  // rows come in whole pairs
        o[o_first + e / 2u] = half_pair(s[r * NT + t], s[(r + 1u) * NT + t]);
    }
#else
    for (uint i = first; i < ROWS * NT; i += stride) {
        const uint r = i / NT, t = i % NT;
        if (row0 + r >= rows || t0 + t >= p.T) continue;
#ifdef SWIGLU
        STORE(o_first + (t0 + t) * o_stride + row0 + r, silu_mul(s[i], s[ROWS * NT + i]));
#else
        STORE(o_first + (t0 + t) * o_stride + row0 + r, s[i]);
#endif
    }
#endif
#ifdef NORM
    // The last workgroup to get here sees every row of the sum (each wrote its rows and made them visible before
    // counting itself) and normalizes the T new rows. The counting invocation fences again after the workgroup's
    // barrier, so that what the others wrote is ordered before its count too.
    memoryBarrierBuffer();
    barrier();
    if (tid == 0u) {
        memoryBarrierBuffer();
        norm_last = atomicAdd(norm_count, 1u) == gl_NumWorkGroups.x - 1u ? 1u : 0u;
    }
    barrier();
    if (norm_last == 0u) return;
    memoryBarrierBuffer();
    for (uint t = 0u; t < p.T; ++t) {
        const uint ob = o_first + t * o_stride;
        const float inv = norm_inv_rms(ob, rows, p.eps);
        for (uint i = tid; i < rows; i += WG)
            xn[p.n_first + t * rows + i] = (o[ob + i] * inv) * gain_at(i, p.gain_type);
    }
    if (tid == 0u) norm_count = 0u;  // for the next dispatch (after a barrier)
#endif
}
