// FeedForward's gate for one element: silu(a) * b with silu(a) = a * sigmoid(a), shared by swiglu.comp and the
// fused w1/w3 product (matvec.comp SWIGLU) so both give the same bits. For very negative a, exp(-a) overflows to
// inf and the quotient is -0, as silu's limit says.
float silu_mul(float a, float b) {
    precise float s = a / (1.0 + exp(-a)) * b;
    return s;
}
