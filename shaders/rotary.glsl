// RoPE's rotation of one pair (re, im) by the angle whose cosine and sine are (cs, sn), shared by rope.comp and
// the q/k projections' epilogue (matvec.comp ROPE) so both give the same bits. `precise` keeps a driver from
// contracting either form into FMAs differently.
vec2 rotate_pair(float re, float im, float cs, float sn) {
    precise float a = re * cs - im * sn;
    precise float b = re * sn + im * cs;
    return vec2(a, b);
}
