#version 450
// Rotary embedding, Meta layout: pair i of a head, (x[2i], x[2i+1]), at position pos is rotated by the angle
// pos * freqs[i]. cos and sin come from a table the host computed in double (positions in the thousands
// would lose the angle's low bits in float32). x: [T, n_heads * head_dim], rotated in place.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;
#include "common.glsl"
#include "rotary.glsl"
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Table { float table[]; };  // [positions, head_dim / 2, (cos, sin)]
layout(push_constant) uniform Push { uint T; uint pairs_per_row; uint half_dim; uint x_first; uint table_first; } p;
void main() {
    const uint i = global_index();  // the i-th pair of the whole [T, n_heads, head_dim / 2] block
    if (i >= p.T * p.pairs_per_row) return;
    const uint t = i / p.pairs_per_row, pair = (i % p.pairs_per_row) % p.half_dim;
    const uint c = p.table_first + 2u * (t * p.half_dim + pair);
    const float cs = table[c], sn = table[c + 1u];
    const float re = x[p.x_first + 2u * i], im = x[p.x_first + 2u * i + 1u];
    const vec2 r = rotate_pair(re, im, cs, sn);
    x[p.x_first + 2u * i] = r.x;
    x[p.x_first + 2u * i + 1u] = r.y;
}
