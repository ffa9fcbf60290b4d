// GGUF block types read straight from their blocks, in ggml's layouts (included by weights.glsl for WTYPE_Q8_0,
// WTYPE_Q4_0, WTYPE_Q4_K, WTYPE_Q5_K, WTYPE_Q6_K). No dequantized copy exists anywhere: each kernel widens the
// 32 weights of one "unit" in registers.
//
// Portability: the blocks are 34, 18, 144, 176 and 210 bytes, so half of the Q8_0, Q4_0 and Q6_K blocks start on
// a 2-byte (not 4-byte) boundary. Rather than ask for storageBuffer8BitAccess / storageBuffer16BitAccess (not
// every driver has them for storage buffers), the buffer is read as 32-bit words (W_WORD, weights.glsl) and a word
// at an even byte offset is put together from two neighbours. Every field of every block lies at an even offset,
// so an f16 scale never straddles two words.
//
// A unit is 32 consecutive weights of a row: one Q8_0 / Q4_0 block, or one eighth of a K super-block (for Q4_K and
// Q5_K one sub-block with its own 6-bit scale and min; for Q6_K two sub-blocks of 16 with 8-bit scales). Its
// weights are w = a * q + b with small integers q: a and b come once per unit (unit_head), the q four at a time
// (unit_quad). Rows are whole blocks (cols is a multiple of the block size, checked by the host).

#if defined(WTYPE_Q8_0)
#define BLOCK_ELEMS 32u
#define BLOCK_BYTES 34u
#elif defined(WTYPE_Q4_0)
#define BLOCK_ELEMS 32u
#define BLOCK_BYTES 18u
#elif defined(WTYPE_Q4_K)
#define BLOCK_ELEMS 256u
#define BLOCK_BYTES 144u
#elif defined(WTYPE_Q5_K)
#define BLOCK_ELEMS 256u
#define BLOCK_BYTES 176u
#elif defined(WTYPE_Q6_K)
#define BLOCK_ELEMS 256u
#define BLOCK_BYTES 210u
#else
#error "quant.glsl: define one of WTYPE_Q8_0, WTYPE_Q4_0, WTYPE_Q4_K, WTYPE_Q5_K, WTYPE_Q6_K"
#endif
#define UNIT_ELEMS 32u

// Byte offset of a row inside the chunk's buffer.
uint row_byte0(uint row, uint cols) { return row * ((cols / BLOCK_ELEMS) * BLOCK_BYTES); }

// The little-endian 32-bit word at an even byte offset (two words put together when it is not a multiple of 4).
// Both loads always happen and a select picks the result, so neighbouring invocations whose blocks differ in
// alignment do not diverge; an aligned offset loads its own word twice, never one past the data.
uint word_at(uint byte) {
    const uint a = W_WORD(byte >> 2u), b = W_WORD((byte + 2u) >> 2u);
    return (byte & 2u) == 0u ? a : (a >> 16u) | (b << 16u);
}

// The 16 bits at an even byte offset.
uint half_bits_at(uint byte) { return (W_WORD(byte >> 2u) >> ((byte & 2u) * 8u)) & 0xFFFFu; }

// IEEE binary16 to float32, exact for every input: subnormal scales (which a driver's unpackHalf2x16 might flush)
// become the normal float32 they equal, inf and nan stay what they are.
float half_to_float(uint h) {
    const uint sign = (h & 0x8000u) << 16u;
    const uint e = (h >> 10u) & 0x1Fu, m = h & 0x3FFu;
    if (e == 0u) {
        // m * 2^-24: float(m) is exact and the scale is a power of two, so the product is too.
        const float v = float(m) * 5.9604644775390625e-8;
        return uintBitsToFloat(floatBitsToUint(v) | sign);
    }
    if (e == 31u) return uintBitsToFloat(sign | 0x7F800000u | (m << 13u));
    return uintBitsToFloat(sign | ((e + 112u) << 23u) | (m << 13u));
}
float half_at(uint byte) { return half_to_float(half_bits_at(byte)); }

// Four unsigned / signed bytes of a word as floats (byte 0 first). Two ways to the same floats, chosen per device
// (specialization constant 3; every kernel that includes this file leaves ids 0-2 to its own constants):
//   BYTE_FLOAT_BITS false: int-to-float conversion, one per weight (one instruction on a CPU device);
//   BYTE_FLOAT_BITS true:  the byte b as the low mantissa bits of 2^23 (the float 2^23 + b, exactly), then a
//   subtraction of 2^23 (exact: the difference is a small integer). A GPU converts integers at a fraction of its
//   float rate (NVIDIA's table: a quarter), while the OR and the subtraction run at the full integer and float
//   rates. Signed bytes are first offset by 128 (a sign-bit flip) and the subtraction takes 2^23 + 128. Both
//   give identical floats for every byte; the tests compare them bit for bit.
layout(constant_id = 3) const bool BYTE_FLOAT_BITS = false;
vec4 ubytes(uint v) {
    const uvec4 b = uvec4(v, v >> 8u, v >> 16u, v >> 24u) & 0xFFu;
    if (BYTE_FLOAT_BITS) return uintBitsToFloat(b | 0x4B000000u) - 8388608.0;
    return vec4(b);
}
vec4 sbytes(uint v) {
    if (BYTE_FLOAT_BITS) {
        const uint u = v ^ 0x80808080u;  // each byte s + 128
        return uintBitsToFloat((uvec4(u, u >> 8u, u >> 16u, u >> 24u) & 0xFFu) | 0x4B000000u) - 8388736.0;
    }
    const int s = int(v);
    return vec4(ivec4(s << 24, s << 16, s << 8, s) >> 24);
}

// What one unit needs besides its quants: w = a * q + b, with a0 for elements 0-15 and a1 for 16-31 (they differ
// only for Q6_K), q_byte where its quants start and shift which nibble (or bits) to take.
struct UnitHead {
    float a0, a1, b;
    uint q_byte;  // Q4_K, Q5_K, Q6_K: the 32 low-quant bytes of the unit; Q8_0, Q4_0: the block's quants
    uint shift;   // nibble of the low quants (0 or 4)
    uint h_byte;  // Q5_K, Q6_K: the 32 high-bit bytes
    uint h_shift; // bit position of this unit's high bits in them
};

#if defined(WTYPE_Q4_K) || defined(WTYPE_Q5_K)
// The 6-bit scale and min of sub-block j (0..7), from the 12 packed bytes at `at`: sub-blocks 0-3 keep theirs in
// the low six bits of bytes j and j+4; 4-7 in the nibbles of byte j+4 with the top two bits from bytes j-4 and j.
uvec2 scale_min(uint at, uint j) {
    const uint s0 = W_WORD(at >> 2u), s1 = W_WORD((at >> 2u) + 1u), s2 = W_WORD((at >> 2u) + 2u);
    const uint sh = (j & 3u) * 8u;
    const uint b0 = (s0 >> sh) & 0xFFu, b1 = (s1 >> sh) & 0xFFu, b2 = (s2 >> sh) & 0xFFu;
    if (j < 4u) return uvec2(b0 & 63u, b1 & 63u);
    return uvec2((b2 & 0xFu) | ((b0 >> 6u) << 4u), (b2 >> 4u) | ((b1 >> 6u) << 4u));
}
#endif

// Unit u (elements [32u, 32u + 32)) of the row starting at byte row0.
UnitHead unit_head(uint row0, uint u) {
    UnitHead h;
    h.shift = 0u;
    h.h_byte = 0u;
    h.h_shift = 0u;
    h.b = 0.0;
#if defined(WTYPE_Q8_0) || defined(WTYPE_Q4_0)
    // struct { f16 d; int8 qs[32] } / struct { f16 d; uint8 qs[16] }: element i of a Q4_0 block is the low
    // nibble of qs[i] for i < 16 and the high nibble of qs[i - 16] after; both minus 8.
    const uint blk = row0 + u * BLOCK_BYTES;
    h.a0 = half_at(blk);
    h.a1 = h.a0;
    h.q_byte = blk + 2u;
#elif defined(WTYPE_Q4_K) || defined(WTYPE_Q5_K)
    // struct { f16 d, dmin; uint8 scales[12]; [Q5_K: uint8 qh[32];] uint8 qs[128] }: eight sub-blocks of 32,
    // w = d * scale_j * q - dmin * min_j. Sub-blocks 2c and 2c+1 share the 32 bytes qs[32c ..): low nibbles, then
    // high. Q5_K adds bit j of qh[l] as the fifth bit of element l of sub-block j.
    const uint blk = row0 + (u >> 3u) * BLOCK_BYTES, j = u & 7u;
    const uint dm = W_WORD(blk >> 2u);
    const uvec2 sm = scale_min(blk + 4u, j);
    h.a0 = half_to_float(dm & 0xFFFFu) * float(sm.x);
    h.a1 = h.a0;
    h.b = -(half_to_float(dm >> 16u) * float(sm.y));
    h.shift = (j & 1u) * 4u;
#if defined(WTYPE_Q4_K)
    h.q_byte = blk + 16u + (j >> 1u) * 32u;
#else
    h.q_byte = blk + 48u + (j >> 1u) * 32u;
    h.h_byte = blk + 16u;
    h.h_shift = j;
#endif
#elif defined(WTYPE_Q6_K)
    // struct { uint8 ql[128]; uint8 qh[64]; int8 scales[16]; f16 d }: two halves of 128; in half n, element
    // 32k + l (k = 0..3, l = 0..31) takes the low (k < 2) or high nibble of ql[64n + 32(k & 1) + l], bits 2k and
    // 2k+1 of qh[32n + l] above them, minus 32, times d * scales[8n + 2k + l / 16].
    const uint blk = row0 + (u >> 3u) * BLOCK_BYTES, n = (u >> 2u) & 1u, k = u & 3u;
    const float d = half_at(blk + 208u);
    const uint sc = half_bits_at(blk + 192u + 8u * n + 2u * k);  // both int8 scales of the unit
    h.a0 = d * float(int(sc << 24u) >> 24);
    h.a1 = d * float(int(sc << 16u) >> 24);
    h.q_byte = blk + 64u * n + 32u * (k & 1u);
    h.shift = (k >> 1u) * 4u;
    h.h_byte = blk + 128u + 32u * n;
    h.h_shift = 2u * k;
#endif
    return h;
}

// Elements 4k .. 4k+3 (k = 0..7) of the unit, as float32.
vec4 unit_quad(UnitHead h, uint k) {
#if defined(WTYPE_Q8_0)
    return h.a0 * sbytes(word_at(h.q_byte + 4u * k));
#elif defined(WTYPE_Q4_0)
    const uint v = (word_at(h.q_byte + 4u * (k & 3u)) >> ((k >> 2u) * 4u)) & 0x0F0F0F0Fu;
    return h.a0 * (ubytes(v) - 8.0);
#elif defined(WTYPE_Q4_K)
    const uint v = (W_WORD((h.q_byte >> 2u) + k) >> h.shift) & 0x0F0F0F0Fu;
    return h.a0 * ubytes(v) + h.b;
#elif defined(WTYPE_Q5_K)
    const uint lo = (W_WORD((h.q_byte >> 2u) + k) >> h.shift) & 0x0F0F0F0Fu;
    const uint hi = ((W_WORD((h.h_byte >> 2u) + k) >> h.h_shift) & 0x01010101u) << 4u;
    return h.a0 * ubytes(lo | hi) + h.b;
#elif defined(WTYPE_Q6_K)
    const uint lo = (word_at(h.q_byte + 4u * k) >> h.shift) & 0x0F0F0F0Fu;
    const uint hi = ((word_at(h.h_byte + 4u * k) >> h.h_shift) & 0x03030303u) << 4u;
    return (k < 4u ? h.a0 : h.a1) * (ubytes(lo | hi) - 32.0);
#endif
}

// Quad k (elements 4k .. 4k+3) of the unit's quants before scale and offset: w = a * q + b with (a, b) =
// unit_scale(h, k / 4), as unit_quants gives them all (matvec's quad-per-invocation form).
vec4 unit_quad_raw(UnitHead h, uint k) {
#if defined(WTYPE_Q8_0)
    return sbytes(word_at(h.q_byte + 4u * k));
#elif defined(WTYPE_Q4_0)
    return ubytes((word_at(h.q_byte + 4u * (k & 3u)) >> ((k >> 2u) * 4u)) & 0x0F0F0F0Fu);
#elif defined(WTYPE_Q4_K)
    return ubytes((W_WORD((h.q_byte >> 2u) + k) >> h.shift) & 0x0F0F0F0Fu);
#elif defined(WTYPE_Q5_K)
    const uint lo = (W_WORD((h.q_byte >> 2u) + k) >> h.shift) & 0x0F0F0F0Fu;
    const uint hi = ((W_WORD((h.h_byte >> 2u) + k) >> h.h_shift) & 0x01010101u) << 4u;
    return ubytes(lo | hi);
#elif defined(WTYPE_Q6_K)
    const uint lo = (word_at(h.q_byte + 4u * k) >> h.shift) & 0x0F0F0F0Fu;
    const uint hi = ((word_at(h.h_byte + 4u * k) >> h.h_shift) & 0x03030303u) << 4u;
    return ubytes(lo | hi);
#endif
}

// The words of the 16 / 32 bytes at an even byte offset, funnelled from 5 / 9 loads (rather than two loads per
// word). The last load is placed so that an aligned offset re-reads a word of its own, never one past the data.
void words4(uint byte, out uint o[4]) {
    uint a[5];
    for (uint k = 0u; k < 4u; ++k) a[k] = W_WORD((byte >> 2u) + k);
    a[4] = W_WORD((byte + 14u) >> 2u);
    const bool odd = (byte & 2u) != 0u;
    for (uint k = 0u; k < 4u; ++k) o[k] = odd ? (a[k] >> 16u) | (a[k + 1u] << 16u) : a[k];
}
void words8(uint byte, out uint o[8]) {
    uint a[9];
    for (uint k = 0u; k < 8u; ++k) a[k] = W_WORD((byte >> 2u) + k);
    a[8] = W_WORD((byte + 30u) >> 2u);
    const bool odd = (byte & 2u) != 0u;
    for (uint k = 0u; k < 8u; ++k) o[k] = odd ? (a[k] >> 16u) | (a[k + 1u] << 16u) : a[k];
}

// The words of the 8 bytes at an even byte offset, from 3 loads (as words4).
uvec2 words2(uint byte) {
    const uint a0 = W_WORD(byte >> 2u), a1 = W_WORD((byte >> 2u) + 1u), a2 = W_WORD((byte + 6u) >> 2u);
    return (byte & 2u) != 0u ? uvec2((a0 >> 16u) | (a1 << 16u), (a1 >> 16u) | (a2 << 16u)) : uvec2(a0, a1);
}

// Pieces (matvec's GPU form of Q4_K and Q6_K with 16-byte x loads; compiled where matvec defines MATVEC_PIECES):
// piece e of a row (e = 0 .. cols / 32) is 32 weights whose quants lie together in the block, so that
// neighbouring invocations read neighbouring bytes, each has several words in flight, and a sub-block's scale is
// worked out once per piece rather than once per quad. Its weights form PIECE_GROUPS groups of contiguous
// elements (piece_group_first), PIECE_GROUP_QUADS quads each; piece_dot takes x in that order (xv: the groups one
// after the other) and each group's sum of x (xs).
#if defined(MATVEC_PIECES) && defined(WTYPE_Q4_K)
// 16 bytes of a super-block's quants in one load: bytes 16 (e % 8) .. +15 of qs[128] in super-block e / 8, i.e.
// elements 16 (e % 2) .. +15 of sub-blocks 2c (the low nibbles) and 2c + 1 (the high ones), c = (e / 2) % 4.
#define PIECES 1
#define PIECE_GROUPS 2u
#define PIECE_GROUP_QUADS 4u
struct Piece {
    uvec4 q;
    vec4 ab;  // w = a q + b: (a, b) of sub-block 2c, then of 2c + 1
};
Piece piece_at(uint row0, uint e) {
    const uint blk = row0 + (e >> 3u) * BLOCK_BYTES, c = (e >> 1u) & 3u;  // row0 and blocks: multiples of 16
    const uint dm = W_WORD(blk >> 2u);
    const float d = half_to_float(dm & 0xFFFFu), dmin = half_to_float(dm >> 16u);
    const uvec2 s0 = scale_min(blk + 4u, 2u * c), s1 = scale_min(blk + 4u, 2u * c + 1u);
    Piece pc;
    pc.q = W_WORD4(((blk + 16u) >> 4u) + (e & 7u));
    pc.ab = vec4(d * float(s0.x), -(dmin * float(s0.y)), d * float(s1.x), -(dmin * float(s1.y)));
    return pc;
}
uint piece_group_first(uint e, uint g) { return (e >> 3u) * 256u + ((e >> 1u) & 3u) * 64u + 32u * g + (e & 1u) * 16u; }
float piece_dot(Piece pc, vec4 xv[8], vec4 xs) {
    float lo = 0.0, hi = 0.0;
    for (uint i = 0u; i < 4u; ++i) {
        lo += dot(ubytes(pc.q[i] & 0x0F0F0F0Fu), xv[i]);
        hi += dot(ubytes((pc.q[i] >> 4u) & 0x0F0F0F0Fu), xv[4u + i]);
    }
    return pc.ab.x * lo + pc.ab.y * xs.x + pc.ab.z * hi + pc.ab.w * xs.y;
}
#elif defined(MATVEC_PIECES) && defined(WTYPE_Q6_K)
// Elements 32k + l0 .. +7 (k = 0..3) of half n of super-block e / 8, n = (e / 4) % 2, l0 = 8 (e % 4): bytes
// l0 .. +7 of the half's two 32-byte runs of ql (low nibbles: k = 0, 1; high: k = 2, 3) and of its qh (bits 2k,
// 2k + 1), and the four int8 scales of those sub-blocks of 16. Blocks lie on 2-byte boundaries: words2.
#define PIECES 1
#define PIECE_GROUPS 4u
#define PIECE_GROUP_QUADS 2u
struct Piece {
    uvec2 qa, qb, qh;  // ql[64n + l0 ..], ql[64n + 32 + l0 ..], qh[32n + l0 ..]
    vec4 a;            // d * scale of k = 0..3 (w = a (q - 32))
};
Piece piece_at(uint row0, uint e) {
    const uint blk = row0 + (e >> 3u) * BLOCK_BYTES, n = (e >> 2u) & 1u, l0 = (e & 3u) * 8u;
    Piece pc;
    pc.qa = words2(blk + 64u * n + l0);
    pc.qb = words2(blk + 64u * n + 32u + l0);
    pc.qh = words2(blk + 128u + 32u * n + l0);
    const float d = half_at(blk + 208u);
    const uvec2 sc = words2(blk + 192u + 8u * n);  // the half's eight scales: 2k + l / 16
    for (uint k = 0u; k < 4u; ++k) {
        const uint b = 2u * k + (l0 >> 4u);
        pc.a[k] = d * float(int(sc[b >> 2u] << (24u - 8u * (b & 3u))) >> 24);
    }
    return pc;
}
uint piece_group_first(uint e, uint g) { return (e >> 3u) * 256u + ((e >> 2u) & 1u) * 128u + 32u * g + (e & 3u) * 8u; }
float piece_dot(Piece pc, vec4 xv[8], vec4 xs) {
    float sum = 0.0;
    for (uint k = 0u; k < 4u; ++k) {
        float s = 0.0;
        for (uint i = 0u; i < 2u; ++i) {
            const uint low = (k & 1u) == 0u ? pc.qa[i] : pc.qb[i];
            const uint nib = (low >> (4u * (k >> 1u))) & 0x0F0F0F0Fu;
            const uint hb = ((pc.qh[i] >> (2u * k)) & 0x03030303u) << 4u;
            s += dot(ubytes(nib | hb), xv[2u * k + i]);
        }
        sum += pc.a[k] * (s - 32.0 * xs[k]);
    }
    return sum;
}
#endif

// The 32 quants of the unit (matvec) as floats before scale and offset, each byte loaded once: weight 4k + c is
// a * q[k][c] + b with (a, b) = unit_scale(h, k / 4). matvec applies a and b once per half unit (sum of q x and
// sum of x) instead of once per weight.
void unit_quants(UnitHead h, out vec4 q[8]) {
#if defined(WTYPE_Q8_0)
    uint v[8];
    words8(h.q_byte, v);
    for (uint k = 0u; k < 8u; ++k) q[k] = sbytes(v[k]);
#elif defined(WTYPE_Q4_0)
    uint v[4];
    words4(h.q_byte, v);
    for (uint k = 0u; k < 4u; ++k) {
        q[k] = ubytes(v[k] & 0x0F0F0F0Fu);
        q[k + 4u] = ubytes((v[k] >> 4u) & 0x0F0F0F0Fu);
    }
#elif defined(WTYPE_Q6_K)
    uint v[8], hb[8];
    words8(h.q_byte, v);
    words8(h.h_byte, hb);
    for (uint k = 0u; k < 8u; ++k)
        q[k] = ubytes(((v[k] >> h.shift) & 0x0F0F0F0Fu) | (((hb[k] >> h.h_shift) & 0x03030303u) << 4u));
#else
    // Q4_K, Q5_K: blocks are 4-byte multiples, every word is one load already.
    for (uint k = 0u; k < 8u; ++k) q[k] = unit_quad_raw(h, k);
#endif
}

// (a, b) of half `half` of the unit (quads 0-3, 4-7): w = a * q + b for unit_quants' q.
vec2 unit_scale(UnitHead h, uint half_) {
    const float a = half_ == 0u ? h.a0 : h.a1;
#if defined(WTYPE_Q8_0)
    return vec2(a, 0.0);
#elif defined(WTYPE_Q4_0)
    return vec2(a, -8.0 * a);
#elif defined(WTYPE_Q6_K)
    return vec2(a, -32.0 * a);
#else
    return vec2(a, h.b);
#endif
}
// Whether b is 0 for every unit (matvec then skips the sums of x).
#if defined(WTYPE_Q8_0)
#define UNIT_NO_OFFSET 1
#endif
// Whether the two halves of a unit share (a, b) (all but Q6_K: matvec then sums the unit as one).
#if !defined(WTYPE_Q6_K)
#define UNIT_ONE_SCALE 1
#endif

// One weight: row `row`, column `col` of a matrix with `cols` columns (embed, and the tiled matmul's staging).
float weight_rc(uint row, uint col, uint cols) {
    const UnitHead h = unit_head(row_byte0(row, cols), col / UNIT_ELEMS);
    const uint e = col % UNIT_ELEMS;
    return unit_quad(h, e >> 2u)[e & 3u];
}
