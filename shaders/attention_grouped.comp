#version 450
// Causal grouped-query attention with the query heads of one KV head together, for the paths that want no
// probabilities (decode, prefill, the default trace): one workgroup per (block of qt queries, kv head[, split])
// owns the rows = qt * n_rep query rows (query t, head kvh * n_rep + i) that read kv head kvh, and reads each key
// and value once for all of them, in loads where neighbouring invocations take neighbouring floats:
//   per block of bk keys: the keys -> shared memory; a score per (row, key) from shared memory; an online softmax
//   per row (running max m and sum l, earlier sums rescaled by exp(m_old - m_new), as attention.comp); then each
//   invocation adds the block's weighted values into the output dims it owns, every value load serving every row.
// Rows see only keys up to their own query's position (causal). attention.comp stays for probabilities (the
// explorer's exact path) and for models whose n_rep * head_dim exceeds what one workgroup holds.
// SPLIT (decode over a long cache): keys [split * split_keys, ...) only; the unnormalised sums with m and l go
// to binding 3 as [T, n_heads, n_splits, head_dim + 2], merged by attention_combine.comp.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 128) in;
#include "common.glsl"
#define WG 128u
#define MAX_ROWS 8u            // query rows per workgroup (the host's qt * n_rep)
#define MAX_ROW_FLOATS 1024u   // rows * head_dim: the staged queries
#define KEY_FLOATS 2112u       // the staged key block: bk * (head_dim + 1)
layout(std430, binding = 0) readonly buffer Q { float q[]; };   // [T, n_heads * head_dim]
layout(std430, binding = 3) writeonly buffer O { float o[]; };  // [T, n_heads * head_dim] (SPLIT: the partials)
layout(push_constant) uniform Push {
    uint T; uint pos0; uint n_heads; uint n_rep; uint head_dim; uint kv_dim;
    uint q_first; uint k_first; uint v_first; uint o_first;
    float scale; uint qt; uint bk;  // queries per workgroup, keys per block (bk * rows <= WG)
    uint n_splits; uint split_keys;
} p;
#include "kv.glsl"

shared float qs[MAX_ROW_FLOATS];  // row r's query at qs[r * head_dim]
shared float ks[KEY_FLOATS];      // key j of the block at ks[j * (head_dim + 1)]: padded, no shared-bank clashes
shared float ws[WG];              // row r, key j at ws[r * bk + j]: the scores, then the softmax weights
shared float rescale_s[MAX_ROWS];
shared float l_s[MAX_ROWS];

#define NEG_INF uintBitsToFloat(0xFF800000u)

void main() {
    uint g = group_index();
#ifdef SPLIT
    const uint split = g % p.n_splits;
    g /= p.n_splits;
#endif
    const uint n_kv = p.n_heads / p.n_rep, blocks = (p.T + p.qt - 1u) / p.qt;
    if (g >= blocks * n_kv) return;  // uniform across the workgroup, before any barrier
    const uint t0 = (g / n_kv) * p.qt, kvh = g % n_kv, D = p.head_dim, q_dim = p.n_heads * D;
    const uint rows = min(p.qt, p.T - t0) * p.n_rep;  // row r: query t0 + r / n_rep, head kvh * n_rep + r % n_rep
    const uint tid = gl_LocalInvocationID.x;

    // The keys this workgroup reads: up to its last query's position (SPLIT: the part of them in this split).
#ifdef SPLIT
    const uint j_begin = split * p.split_keys, split_end = j_begin + p.split_keys;
#else
    const uint j_begin = 0u, split_end = 0xFFFFFFFFu;
#endif
    const uint j_end = min(p.pos0 + t0 + rows / p.n_rep, split_end);

    for (uint e = tid; e < rows * D; e += WG) {
        const uint r = e / D, t = t0 + r / p.n_rep, h = kvh * p.n_rep + r % p.n_rep;
        qs[e] = q[p.q_first + t * q_dim + h * D + e % D];
    }

    // The output elements this invocation owns: dims lane (+ WG when head_dim > WG) of rows r0, r0 + rs, ...
    const uint lanes = min(D, WG), rs = WG / lanes, lane = tid % lanes, r0 = tid / lanes;
    float acc[2u * MAX_ROWS];
    for (uint i = 0u; i < 2u * MAX_ROWS; ++i) acc[i] = 0.0;
    float m = NEG_INF, l = 0.0;  // row tid's softmax state, for tid < rows
    const uint kbase = kvh * D, vbase = kvh * D;  // elements of the caches

    for (uint j0 = j_begin; j0 < j_end; j0 += p.bk) {
        const uint nb = min(p.bk, j_end - j0);
#ifdef KV_F16
        for (uint e = 2u * tid; e < nb * D; e += 2u * WG) {  // two dims of a row per word (head_dim is even)
            const uint j = e / D, d = e % D;
            const vec2 kk = key_pair(kbase + (j0 + j) * p.kv_dim + d);
            ks[j * (D + 1u) + d] = kk.x;
            ks[j * (D + 1u) + d + 1u] = kk.y;
        }
#else
        for (uint e = tid; e < nb * D; e += WG) {
            const uint j = e / D, d = e % D;
            ks[j * (D + 1u) + d] = key_at(kbase + (j0 + j) * p.kv_dim + d);
        }
#endif
        barrier();  // the queries and the block's keys are staged before any score reads them
        if (tid < rows * p.bk) {
            const uint r = tid / p.bk, j = tid % p.bk;
            float s = NEG_INF;
            if (j < nb && j0 + j <= p.pos0 + t0 + r / p.n_rep) {  // the causal mask
                s = 0.0;
                for (uint d = 0u; d < D; ++d) s += qs[r * D + d] * ks[j * (D + 1u) + d];
                s *= p.scale;
            }
            ws[tid] = s;
        }
        barrier();  // the block's scores are written before each row's softmax reads them
        if (tid < rows) {
            float bm = NEG_INF;
            for (uint j = 0u; j < nb; ++j) bm = max(bm, ws[tid * p.bk + j]);
            float rescale = 1.0;
            if (bm != NEG_INF) {  // a row whose keys all lie right of its query takes nothing from this block
                const float m_new = max(m, bm);
                rescale = exp(m - m_new);
                float sum = 0.0;
                for (uint j = 0u; j < nb; ++j) {
                    const float w = exp(ws[tid * p.bk + j] - m_new);  // exp(-inf) = 0 for masked keys
                    ws[tid * p.bk + j] = w;
                    sum += w;
                }
                l = l * rescale + sum;
                m = m_new;
            } else {
                for (uint j = 0u; j < nb; ++j) ws[tid * p.bk + j] = 0.0;
            }
            rescale_s[tid] = rescale;
        }
        barrier();  // the weights and rescale factors are written before the values are weighed
        if (r0 < rs) {
            for (uint i = 0u; i < MAX_ROWS; ++i) {
                const uint r = r0 + i * rs;
                if (r < rows) {
                    acc[2u * i] *= rescale_s[r];
                    acc[2u * i + 1u] *= rescale_s[r];
                }
            }
            // Constant loop bounds and guards (no breaks), so that acc stays in registers once unrolled.
            for (uint j = 0u; j < nb; ++j) {
                const uint vrow = vbase + (j0 + j) * p.kv_dim;
                for (uint half_ = 0u; half_ < 2u; ++half_) {
                    const uint d = lane + half_ * WG;
                    if (d < D) {
                        const float val = value_at(vrow + d);
                        for (uint i = 0u; i < MAX_ROWS; ++i) {
                            const uint r = r0 + i * rs;
                            if (r < rows) acc[2u * i + half_] += ws[r * p.bk + j] * val;
                        }
                    }
                }
            }
        }
        // The next block's keys overwrite ks, which no one reads after the scores; its scores overwrite ws and
        // rescale_s only after the barrier that follows the staging, by when every invocation is done here.
    }
    if (tid < rows) l_s[tid] = l;
    barrier();  // every row's sum is written before it divides (or is written out with) the output
#ifdef SPLIT
    // An empty split (every row's query left of it) leaves m = -inf, l = 0: it weighs nothing in the combine.
    if (tid < rows) {
        const uint t = t0 + tid / p.n_rep, h = kvh * p.n_rep + tid % p.n_rep;
        const uint base = p.o_first + ((t * p.n_heads + h) * p.n_splits + split) * (D + 2u);
        o[base + D] = m;
        o[base + D + 1u] = l;
    }
#endif
    if (r0 < rs) {
        for (uint i = 0u; i < MAX_ROWS; ++i) {
            const uint r = r0 + i * rs;
            if (r >= rows) continue;
            const uint t = t0 + r / p.n_rep, h = kvh * p.n_rep + r % p.n_rep;
#ifdef SPLIT
            const uint base = p.o_first + ((t * p.n_heads + h) * p.n_splits + split) * (D + 2u);
            const float inv = 1.0;
#else
            const uint base = p.o_first + t * q_dim + h * D;
            const float inv = 1.0 / l_s[r];
#endif
            for (uint half_ = 0u; half_ < 2u; ++half_) {
                const uint d = lane + half_ * WG;
                if (d < D) o[base + d] = acc[2u * i + half_] * inv;
            }
        }
    }
}
