#version 450
// Causal grouped-query attention for prompts, in flash-attention tiles: one workgroup per (block of qt queries,
// kv head) owns rows = qt * n_rep query rows (query t, head kvh * n_rep + i) and walks the keys in blocks of BK,
// each key and value block staged once in shared memory for all of its rows. attention_grouped.comp holds at most
// 8 rows; here every invocation is one of the C lanes of a row (C = head_dim / DC, a power of two up to 8), so a
// workgroup holds WG / C rows (128 invocations: 16 at head_dim 128, 64 at 32; WG is a specialization constant)
// and no phase leaves invocations idle:
//   lane c of a row keeps dims c, c + C, c + 2C, ... (DC of them) of its query and of its output in registers;
//   per key it sums its dims' products and the C lanes add their sums with subgroup shuffles (a butterfly, so
//   every lane gets the same score); per block each lane keeps the BK scores, and the online softmax (running
//   max m and sum l, the earlier output rescaled by exp(m_old - m_new)) and the weighted values follow in the
//   lane itself. Interleaved dims put a row's C lanes on C neighbouring floats of shared memory and of the output.
// Rows see only keys up to their own query's position (causal). The host uses it for prompts without
// probabilities when the device has subgroup shuffles with subgroups of at least C invocations.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
layout(local_size_x_id = 3) in;
#include "common.glsl"
#define MAX_DC 32u        // dims per lane: head_dim / C
#define MAX_BK 32u        // keys per block
#define KV_FLOATS 2048u   // BK * head_dim, for each of the key and value blocks (16 KiB together)
// The model's shape as specialization constants, so that every loop below has a constant trip count.
layout(constant_id = 0) const uint C = 8;    // lanes per row: a power of two that divides head_dim
layout(constant_id = 1) const uint DC = 16;  // dims per lane: head_dim / C, at most MAX_DC
layout(constant_id = 2) const uint BK = 16;  // keys per block: at most MAX_BK, BK * head_dim <= KV_FLOATS
layout(constant_id = 3) const uint WG = 128;  // invocations: WG / C rows share each key and value block
layout(std430, binding = 0) readonly buffer Q { float q[]; };   // [T, n_heads * head_dim]
layout(std430, binding = 3) writeonly buffer O { float o[]; };  // [T, n_heads * head_dim]
layout(push_constant) uniform Push {
    uint T; uint pos0; uint n_heads; uint n_rep; uint head_dim; uint kv_dim;
    uint q_first; uint k_first; uint v_first; uint o_first;
    float scale; uint qt;  // queries per workgroup (qt * n_rep * C <= WG)
} p;
#include "kv.glsl"

shared float ks[KV_FLOATS];  // key j of the block at ks[j * head_dim]
shared float vs[KV_FLOATS];  // value j at vs[j * head_dim]

#define NEG_INF uintBitsToFloat(0xFF800000u)

void main() {
    const uint g = group_index();
    const uint n_kv = p.n_heads / p.n_rep, blocks = (p.T + p.qt - 1u) / p.qt;
    if (g >= blocks * n_kv) return;  // uniform across the workgroup, before any barrier
    const uint t0 = (g / n_kv) * p.qt, kvh = g % n_kv, D = C * DC, q_dim = p.n_heads * D;
    const uint queries = min(p.qt, p.T - t0), rows = queries * p.n_rep;
    const uint tid = gl_LocalInvocationID.x;
    // A row's lanes are neighbours within one subgroup (the host checks subgroups hold at least C invocations),
    // whatever order the device gives the workgroup's subgroups.
    const uint me = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID, r = me / C, c = me % C;
    const bool live = r < rows;
    const uint t = t0 + r / p.n_rep, h = kvh * p.n_rep + r % p.n_rep, last_key = p.pos0 + t;

    float qv[MAX_DC], acc[MAX_DC];
    for (uint i = 0u; i < DC; ++i) {
        qv[i] = live ? q[p.q_first + t * q_dim + h * D + c + i * C] : 0.0;
        acc[i] = 0.0;
    }
    float m = NEG_INF, l = 0.0;
    const uint kbase = kvh * D, vbase = kvh * D;  // elements of the caches
    const uint j_end = p.pos0 + t0 + queries;  // the keys up to the last query's position

    for (uint j0 = 0u; j0 < j_end; j0 += BK) {
        const uint nb = min(BK, j_end - j0);
#ifdef KV_F16
        for (uint e = 2u * tid; e < nb * D; e += 2u * WG) {  // two dims of a row per word (head_dim is even)
            const uint src = (j0 + e / D) * p.kv_dim + e % D;
            const vec2 kk = key_pair(kbase + src), vv = value_pair(vbase + src);
            ks[e] = kk.x;
            ks[e + 1u] = kk.y;
            vs[e] = vv.x;
            vs[e + 1u] = vv.y;
        }
#else
        for (uint e = tid; e < nb * D; e += WG) {
            const uint src = (j0 + e / D) * p.kv_dim + e % D;
            ks[e] = key_at(kbase + src);
            vs[e] = value_at(vbase + src);
        }
#endif
        barrier();  // the block's keys and values are staged before anyone reads them

        // Constant loop bounds and guards (no breaks), so that the arrays stay in registers once unrolled; the
        // shuffles run in every lane (the guards are uniform), inactive rows included.
        float s[MAX_BK];
        float bm = NEG_INF;
        for (uint j = 0u; j < BK; ++j) {
            s[j] = NEG_INF;
            if (j < nb) {
                float part = 0.0;
                for (uint i = 0u; i < DC; ++i) part += qv[i] * ks[j * D + c + i * C];
                for (uint x = 1u; x < C; x <<= 1u) part += subgroupShuffleXor(part, x);
                if (live && j0 + j <= last_key) {  // the causal mask
                    s[j] = part * p.scale;
                    bm = max(bm, s[j]);
                }
            }
        }
        if (bm != NEG_INF) {  // a row whose keys all lie right of its query takes nothing from this block
            const float m_new = max(m, bm), rescale = exp(m - m_new);
            l *= rescale;
            for (uint i = 0u; i < DC; ++i) acc[i] *= rescale;
            for (uint j = 0u; j < BK; ++j) {
                if (j < nb) {
                    const float w = exp(s[j] - m_new);  // exp(-inf) = 0 for masked keys
                    l += w;
                    for (uint i = 0u; i < DC; ++i) acc[i] += w * vs[j * D + c + i * C];
                }
            }
            m = m_new;
        }
        barrier();  // every lane is done with the block before the next one overwrites it
    }
    if (live) {
        const uint base = p.o_first + t * q_dim + h * D + c;
        const float inv = 1.0 / l;
        for (uint i = 0u; i < DC; ++i) o[base + i * C] = acc[i] * inv;
    }
}
