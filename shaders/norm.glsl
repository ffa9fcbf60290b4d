// RMSNorm's 1 / sqrt(mean(x^2) + eps) over one row, summed in one fixed order whatever the workgroup or subgroup
// size: 64 lanes each add every 64th square (fma), then the 64 lane sums are added in order. rmsnorm.comp and
// matvec.comp's NORM tail (the norm after wo's or w2's residual add) both use it, so the two give the same bits.
// The includer defines NORM_X(i), element i of its buffer; every invocation of the workgroup must call it (it
// holds barriers).
const uint NORM_LANES = 64u;
shared float norm_lanes[NORM_LANES];

float norm_inv_rms(uint first, uint n, float eps) {
    for (uint l = gl_LocalInvocationID.x; l < NORM_LANES; l += gl_WorkGroupSize.x) {
        float ss = 0.0;
        for (uint i = l; i < n; i += NORM_LANES) {
            const float v = NORM_X(first + i);
            ss = fma(v, v, ss);
        }
        norm_lanes[l] = ss;
    }
    barrier();  // every lane's sum is written
    float total = 0.0;
    for (uint l = 0u; l < NORM_LANES; ++l) total += norm_lanes[l];
    barrier();  // and read by everyone before a next row overwrites them
    return inversesqrt(total / float(n) + eps);
}
