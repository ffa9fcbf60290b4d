#version 450
// RMSNorm: out[t, :] = x[t, :] * rsqrt(mean(x[t, :]^2) + eps) * weight, one workgroup per row, float32. The sum
// of squares in norm.glsl's fixed order, which matvec.comp's NORM tail shares.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;
#include "common.glsl"
#define WEIGHTS_BINDING 1
#include "weights.glsl"
layout(std430, binding = 0) readonly buffer X { float x[]; };   // [T, n]
#define NORM_X(i) x[i]
#include "norm.glsl"
layout(std430, binding = 2) writeonly buffer O { float o[]; };  // [T, n], may alias x
layout(push_constant) uniform Push { uint n; uint T; uint x_first; uint o_first; float eps; } p;
void main() {
    const uint t = group_index();
    if (t >= p.T) return;  // uniform across the workgroup, before any barrier
    const uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
    const uint xb = p.x_first + t * p.n, ob = p.o_first + t * p.n;
    const float inv = norm_inv_rms(xb, p.n, p.eps);
    for (uint i = tid; i < p.n; i += wg) o[ob + i] = (x[xb + i] * inv) * weight_at(i);
}
