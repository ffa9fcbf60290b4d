#version 450
// Top-k of a logits row on the device, k <= 64. A pass splits its items into groups of WG * E; a workgroup
// keeps its E items per invocation in registers and picks its group's best k in k rounds: each round takes
// the best item ranked after the previous pick (so nothing needs marking). The order is the CPU backend's:
// larger value first, lower id on ties, NaN after everything. The first pass reads the row (id = index); a
// MERGE pass reads the (value, id) candidates of the pass before, until one group is left.
#extension GL_GOOGLE_include_directive : require
layout(constant_id = 0) const uint WG = 256;  // a CPU device runs one subgroup per workgroup (no barriers)
layout(local_size_x_id = 0) in;
#include "common.glsl"
#define E 16u
#ifdef MERGE
layout(std430, binding = 0) readonly buffer In { uint cand[]; };  // [n][value bits, id]
#else
layout(std430, binding = 0) readonly buffer In { float row[]; };  // [n]
#endif
layout(std430, binding = 1) writeonly buffer Out { uint best[]; };  // [groups][k][value bits, id]
layout(push_constant) uniform Push { uint n; uint k; uint in_first; uint out_first; } p;

const uint NONE = 0xFFFFFFFFu;

// A key that orders like the values (larger ranks first); -0 equals +0; NaN ranks last (0, below -inf).
uint order_key(float v) {
    if (isnan(v)) return 0u;
    const uint u = v == 0.0 ? 0u : floatBitsToUint(v);
    return (u & 0x80000000u) != 0u ? ~u : (u | 0x80000000u);
}

shared uint s_key[WG], s_id[WG], s_val[WG];  // per-subgroup winners (WG slots cover any subgroup size)

void main() {
    const uint g = group_index();
    const uint base = g * WG * E;
    if (base >= p.n) return;  // uniform across the workgroup, before any barrier
    const uint tid = gl_LocalInvocationID.x;
    uint keys[E], ids[E], vals[E];
    for (uint e = 0u; e < E; ++e) {
        const uint idx = base + e * WG + tid;
        ids[e] = NONE;
        keys[e] = 0u;
        vals[e] = 0u;
        if (idx < p.n) {
#ifdef MERGE
            vals[e] = cand[p.in_first + 2u * idx];
            ids[e] = cand[p.in_first + 2u * idx + 1u];
            if (ids[e] != NONE) keys[e] = order_key(uintBitsToFloat(vals[e]));
#else
            const float v = row[p.in_first + idx];
            vals[e] = floatBitsToUint(v);
            ids[e] = idx;
            keys[e] = order_key(v);
#endif
        }
    }
    uint prev_key = 0xFFFFFFFFu, prev_id = 0u;  // above every key: nothing picked yet
    for (uint r = 0u; r < p.k; ++r) {
        // This invocation's best item among those ranked after the previous pick.
        uint bk = 0u, bi = NONE, bv = 0u;
        for (uint e = 0u; e < E; ++e) {
            if (ids[e] == NONE) continue;
            const bool after = keys[e] < prev_key || (keys[e] == prev_key && ids[e] > prev_id);
            const bool better = bi == NONE || keys[e] > bk || (keys[e] == bk && ids[e] < bi);
            if (after && better) {
                bk = keys[e];
                bi = ids[e];
                bv = vals[e];
            }
        }
        // The subgroup's best: highest key, then lowest id among those holding it (ids are unique).
        const uint sk = subgroupMax(bk);
        const uint si = subgroupMin(bk == sk ? bi : NONE);
        const uint sv = subgroupMax(bk == sk && bi == si ? bv : 0u);
        uint wk = sk, wi = si, wv = sv;
        if (gl_NumSubgroups > 1u) {  // uniform: a one-subgroup workgroup needs no shared step
            if (subgroupElect()) {
                s_key[gl_SubgroupID] = sk;
                s_id[gl_SubgroupID] = si;
                s_val[gl_SubgroupID] = sv;
            }
            barrier();  // every subgroup's winner is visible
            wk = s_key[0];
            wi = s_id[0];
            wv = s_val[0];
            for (uint s = 1u; s < gl_NumSubgroups; ++s) {
                if (s_key[s] > wk || (s_key[s] == wk && s_id[s] < wi)) {
                    wk = s_key[s];
                    wi = s_id[s];
                    wv = s_val[s];
                }
            }
            barrier();  // everyone has read the winners before the next round writes new ones
        }
        if (tid == 0u) {
            best[p.out_first + 2u * (g * p.k + r)] = wv;
            best[p.out_first + 2u * (g * p.k + r) + 1u] = wi;  // NONE when fewer than k items exist
        }
        prev_key = wk;
        prev_id = wi;
    }
}
