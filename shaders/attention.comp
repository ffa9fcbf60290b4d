#version 450
// Causal grouped-query attention over the KV cache, one workgroup per (query t, head h):
//   out = softmax(q k^T / sqrt(head_dim)) v   over keys 0 .. pos0 + t, kv head h / n_rep.
// Keys are taken a block of WG at a time (one score per invocation) with an online softmax: a running max m and
// sum l, earlier partial sums rescaled by exp(m_old - m_new). Nothing of size T x T is stored, so prefill
// costs memory linear in T. When probs are requested, a first pass finds m and l for the whole row so that the
// second can write exact probabilities [n_heads, T, pos0 + T] (zeros right of the causal edge).
// SPLIT (decode over a long cache): a workgroup per (t, h, split) takes only the keys of its split and writes
// its unnormalised sum with m and l to binding 3 as [T, n_heads, n_splits, head_dim + 2]; attention_combine.comp
// merges the splits, so a single query keeps the whole GPU busy instead of one workgroup per head.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 128) in;
#include "common.glsl"
#define WG 128u
#include "reduce.glsl"
layout(std430, binding = 0) readonly buffer Q { float q[]; };  // [T, n_heads * head_dim]
layout(std430, binding = 3) writeonly buffer O { float o[]; };  // [T, n_heads * head_dim] (SPLIT: the partials)
layout(std430, binding = 4) writeonly buffer P { float probs[]; };  // [n_heads, p_T, p_L] when write_probs
layout(push_constant) uniform Push {
    uint T; uint pos0; uint n_heads; uint n_rep; uint head_dim; uint kv_dim;
    uint q_first; uint k_first; uint v_first; uint o_first; uint p_first;
    uint write_probs; float scale; uint p_T; uint p_t0; uint p_L;  // probs of queries p_t0.. of all p_T
    uint n_splits; uint split_keys;                                // SPLIT: keys [s * split_keys, ...) per split
} p;
#include "kv.glsl"

shared float qs[2u * WG];  // the query row (head_dim <= 2 * WG)
shared float weights[WG];  // this block's softmax weights

#define NEG_INF uintBitsToFloat(0xFF800000u)

float score(uint j, uint kbase) {
    float s = 0.0;
    const uint row = kbase + j * p.kv_dim;
    for (uint d = 0u; d < p.head_dim; ++d) s += qs[d] * key_at(row + d);
    return s * p.scale;
}

void main() {
    uint g = group_index();
#ifdef SPLIT
    const uint split = g % p.n_splits;
    g /= p.n_splits;
#endif
    if (g >= p.T * p.n_heads) return;  // uniform across the workgroup, before any barrier
    const uint t = g / p.n_heads, h = g % p.n_heads, kvh = h / p.n_rep;
    const uint tid = gl_LocalInvocationID.x;
    // The causal mask: keys up to the query's own position (SPLIT: the part of them in this split).
#ifdef SPLIT
    const uint j_begin = split * p.split_keys;
    const uint n_keys = min(p.pos0 + t + 1u, j_begin + p.split_keys);
    const bool exact = false;
#else
    const uint j_begin = 0u;
    const uint n_keys = p.pos0 + t + 1u;
    const bool exact = p.write_probs != 0u;
#endif
    const uint row = t * p.n_heads * p.head_dim + h * p.head_dim;
    for (uint d = tid; d < p.head_dim; d += WG) qs[d] = q[p.q_first + row + d];
    barrier();  // the query is staged before any score reads it
    const uint kbase = kvh * p.head_dim, vbase = kvh * p.head_dim;  // elements of the caches

    float m = NEG_INF, l = 0.0;
    if (exact) {
        for (uint j0 = j_begin; j0 < n_keys; j0 += WG) {
            const uint j = j0 + tid;
            const float s = j < n_keys ? score(j, kbase) : NEG_INF;
            const float m_new = max(m, workgroup_max(s));
            l = l * exp(m - m_new) + workgroup_sum(j < n_keys ? exp(s - m_new) : 0.0);
            m = m_new;
        }
    }
    const uint prow = p.p_first + (h * p.p_T + p.p_t0 + t) * p.p_L;
    float acc0 = 0.0, acc1 = 0.0;  // output dims tid and tid + WG
    for (uint j0 = j_begin; j0 < n_keys; j0 += WG) {
        const uint j = j0 + tid;
        const float s = j < n_keys ? score(j, kbase) : NEG_INF;
        float w, rescale = 1.0;
        if (exact) {
            w = j < n_keys ? exp(s - m) / l : 0.0;
            if (j < n_keys) probs[prow + j] = w;
        } else {
            const float m_new = max(m, workgroup_max(s));  // finite: the block's first key is in range
            w = j < n_keys ? exp(s - m_new) : 0.0;
            rescale = exp(m - m_new);
            l = l * rescale + workgroup_sum(w);
            m = m_new;
        }
        weights[tid] = w;
        barrier();  // the block's weights are staged before the weighted sum of values reads them
        acc0 *= rescale;
        acc1 *= rescale;
        const uint nb = min(WG, n_keys - j0);
        for (uint jj = 0u; jj < nb; ++jj) {
            const float wj = weights[jj];
            const uint vrow = vbase + (j0 + jj) * p.kv_dim;
            if (tid < p.head_dim) acc0 += wj * value_at(vrow + tid);
            if (tid + WG < p.head_dim) acc1 += wj * value_at(vrow + tid + WG);
        }
        barrier();  // everyone has used the weights before the next block overwrites them
    }
#ifdef SPLIT
    // An empty split (a query left of it) leaves m = -inf, l = 0: it weighs nothing in the combine.
    const uint base = p.o_first + (g * p.n_splits + split) * (p.head_dim + 2u);
    if (tid < p.head_dim) o[base + tid] = acc0;
    if (tid + WG < p.head_dim) o[base + tid + WG] = acc1;
    if (tid == 0u) {
        o[base + p.head_dim] = m;
        o[base + p.head_dim + 1u] = l;
    }
#else
    if (exact)
        for (uint j = n_keys + tid; j < p.p_L; j += WG) probs[prow + j] = 0.0;
    const float inv = exact ? 1.0 : 1.0 / l;
    const uint obase = p.o_first + row;
    if (tid < p.head_dim) o[obase + tid] = acc0 * inv;
    if (tid + WG < p.head_dim) o[obase + tid + WG] = acc1 * inv;
#endif
}
