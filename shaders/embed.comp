#version 450
// h = tok_embeddings(tokens): out[t, :] = tok_embeddings[tokens[t], :], widened to float32.
// The table may be split by rows over several buffers; each dispatch serves the rows [row0, row0 + rows) its
// chunk holds and leaves the other tokens to the other chunks' dispatches.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;
#include "common.glsl"
#define WEIGHTS_BINDING 0
#include "weights.glsl"
layout(std430, binding = 1) readonly buffer Tokens { int tokens[]; };
layout(std430, binding = 2) writeonly buffer O { float o[]; };  // [T, dim]
layout(push_constant) uniform Push { uint T; uint dim; uint row0; uint rows; uint tok_first; uint o_first; } p;
void main() {
    const uint i = global_index();
    if (i >= p.T * p.dim) return;
    const uint t = i / p.dim, c = i % p.dim;
    const int token = tokens[p.tok_first + t];
    const uint r = uint(token) - p.row0;  // wraps around for tokens below this chunk
    if (token < 0 || r >= p.rows) return;
    o[p.o_first + i] = weight_rc(r, c, p.dim);
}
