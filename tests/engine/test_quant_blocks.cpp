// ggml's block types, one block at a time: strata::quant against decoders written here, element by element, from
// the format definition (ggml-common.h's structs, the order of operations in strata/quant.hpp), never calling the
// engine's decoders. Blocks are random bytes with chosen scales: ordinary, zero, negative, the largest finite f16,
// and f16 subnormals. Then quantize -> dequantize error bounds, dot products, the CPU backend's matmul with block
// weights, and malformed blocks.
#include <algorithm>
#include <bit>
#include <cstdlib>
#include <limits>
#include <ctime>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "catch.hpp"
#include "strata/backend.hpp"
#include "strata/dtype.hpp"
#include "strata/error.hpp"
#include "strata/quant.hpp"
#include "support.hpp"

using namespace strata;

namespace {

// ---------------------------------------------------------------- independent reference decoders

// IEEE binary16 from its three fields, in double (exact), then to float (exact: every f16 is a float).
float ref_half(uint16_t h) {
    const int sign = h >> 15, exponent = (h >> 10) & 31, mantissa = h & 1023;
    double v;
    if (exponent == 31) return mantissa ? std::numeric_limits<float>::quiet_NaN()
                                        : (sign ? -std::numeric_limits<float>::infinity()
                                                : std::numeric_limits<float>::infinity());
    if (exponent == 0)
        v = std::ldexp(static_cast<double>(mantissa), -24);  // subnormal: 0.m * 2^-14
    else
        v = std::ldexp(1024.0 + mantissa, exponent - 25);    // 1.m * 2^(e-15)
    return static_cast<float>(sign ? -v : v);
}

uint16_t u16_at(const std::vector<uint8_t>& b, size_t at) { return static_cast<uint16_t>(b[at] | (b[at + 1] << 8)); }

// Bits [lo, lo+n) of a byte.
int bits(uint8_t byte, int lo, int n) { return (byte >> lo) & ((1 << n) - 1); }

// Q8_0: d (f16) then 32 int8.
float ref_q8_0(const std::vector<uint8_t>& b, size_t block, int e) {
    const size_t at = block * 34;
    return ref_half(u16_at(b, at)) * static_cast<float>(static_cast<int8_t>(b[at + 2 + e]));
}

// Q4_0: d then 16 bytes; weight e < 16 is the low nibble of byte e, weight e >= 16 the high nibble of byte e-16.
float ref_q4_0(const std::vector<uint8_t>& b, size_t block, int e) {
    const size_t at = block * 18;
    const int q = e < 16 ? bits(b[at + 2 + e], 0, 4) : bits(b[at + 2 + e - 16], 4, 4);
    return ref_half(u16_at(b, at)) * static_cast<float>(q - 8);
}

// K types: the 6-bit scale and min of sub-block j from the 12 bytes at `s`. Sub-blocks 0..3 keep theirs in the
// low six bits of bytes j (scale) and j+4 (min); sub-blocks 4..7 have their low four bits in the nibbles of byte
// j+4 and their top two bits in the top bits of bytes j-4 (scale) and j (min).
void ref_scale_min(const uint8_t* s, int j, int& sc, int& m) {
    if (j < 4) {
        sc = bits(s[j], 0, 6);
        m = bits(s[j + 4], 0, 6);
    } else {
        sc = bits(s[j + 4], 0, 4) + 16 * bits(s[j - 4], 6, 2);
        m = bits(s[j + 4], 4, 4) + 16 * bits(s[j], 6, 2);
    }
}

// Q4_K (144 bytes): d, dmin, scales[12], qs[128]. Weight e: chunk c = e/64 uses qs[32c..); within the chunk the
// first 32 are low nibbles, the next 32 high nibbles; sub-block e/32.
float ref_q4_k(const std::vector<uint8_t>& b, size_t block, int e) {
    const size_t at = block * 144;
    const float d = ref_half(u16_at(b, at)), dmin = ref_half(u16_at(b, at + 2));
    int sc, m;
    ref_scale_min(&b[at + 4], e / 32, sc, m);
    const int c = e / 64, l = e % 32, high = (e % 64) / 32;
    const int q = bits(b[at + 16 + 32 * c + l], 4 * high, 4);
    const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
    return d1 * static_cast<float>(q) - m1;
}

// Q5_K (176 bytes): d, dmin, scales[12], qh[32], qs[128]; as Q4_K plus a fifth bit: bit (2c + high) of qh[l].
float ref_q5_k(const std::vector<uint8_t>& b, size_t block, int e) {
    const size_t at = block * 176;
    const float d = ref_half(u16_at(b, at)), dmin = ref_half(u16_at(b, at + 2));
    int sc, m;
    ref_scale_min(&b[at + 4], e / 32, sc, m);
    const int c = e / 64, l = e % 32, high = (e % 64) / 32;
    const int q = bits(b[at + 48 + 32 * c + l], 4 * high, 4) + 16 * bits(b[at + 16 + l], 2 * c + high, 1);
    const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
    return d1 * static_cast<float>(q) - m1;
}

// Q6_K (210 bytes): ql[128], qh[64], scales[16] (int8), d. Weight e: half h = e/128, k = (e%128)/32 (which of
// four 32-runs), l = e%32. Low four bits: byte ql[64h + l + 32*(k%2)], nibble k/2. High two bits: bits 2k, 2k+1
// of qh[32h + l]. Scale: scales[e/16]. w = (d * scale) * (q - 32).
float ref_q6_k(const std::vector<uint8_t>& b, size_t block, int e) {
    const size_t at = block * 210;
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    const int lo = bits(b[at + 64 * h + l + 32 * (k % 2)], 4 * (k / 2), 4);
    const int hi = bits(b[at + 128 + 32 * h + l], 2 * k, 2);
    const int q = lo + 16 * hi - 32;
    const float scale = static_cast<float>(static_cast<int8_t>(b[at + 192 + e / 16]));
    return (ref_half(u16_at(b, at + 208)) * scale) * static_cast<float>(q);
}

float ref_weight(DType t, const std::vector<uint8_t>& b, int64_t i) {
    const int64_t bs = dtype_block_size(t);
    const size_t block = static_cast<size_t>(i / bs);
    const int e = static_cast<int>(i % bs);
    switch (t) {
        case DType::Q8_0: return ref_q8_0(b, block, e);
        case DType::Q4_0: return ref_q4_0(b, block, e);
        case DType::Q4_K: return ref_q4_k(b, block, e);
        case DType::Q5_K: return ref_q5_k(b, block, e);
        case DType::Q6_K: return ref_q6_k(b, block, e);
        default: FAIL("not a block type"); return 0;
    }
}

const DType kTypes[] = {DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};

// Byte offsets of a block's f16 scales.
std::vector<int> scale_offsets(DType t) {
    switch (t) {
        case DType::Q4_K:
        case DType::Q5_K: return {0, 2};
        case DType::Q6_K: return {208};
        default: return {0};
    }
}

// A finite f16 scale of a kind: 0 ordinary, 1 zero, 2 subnormal, 3 largest finite, 4 smallest subnormal.
uint16_t scale_of_kind(int kind, std::mt19937& rng) {
    const uint16_t sign = (rng() & 1) ? 0x8000 : 0;
    switch (kind) {
        case 1: return sign;
        case 2: return static_cast<uint16_t>(sign | (1 + rng() % 1023));  // exponent 0, mantissa != 0
        case 3: return static_cast<uint16_t>(sign | 0x7bff);              // 65504
        case 4: return static_cast<uint16_t>(sign | 1);                   // 2^-24
        default: return static_cast<uint16_t>(sign | ((1 + rng() % 30) << 10) | (rng() & 1023));
    }
}

// nblocks random blocks; block k's scales are of kind k % 5 (so every kind and pairs of kinds appear).
std::vector<uint8_t> random_blocks(DType t, int64_t nblocks, std::mt19937& rng) {
    std::vector<uint8_t> b(static_cast<size_t>(nblocks * dtype_block_bytes(t)));
    for (uint8_t& x : b) x = static_cast<uint8_t>(rng());
    for (int64_t k = 0; k < nblocks; ++k)
        for (size_t s = 0; s < scale_offsets(t).size(); ++s) {
            const int kind = static_cast<int>((k + 2 * static_cast<int64_t>(s) * (k / 5)) % 5);
            const uint16_t h = scale_of_kind(kind, rng);
            const size_t at = static_cast<size_t>(k * dtype_block_bytes(t) + scale_offsets(t)[s]);
            b[at] = static_cast<uint8_t>(h & 0xff);
            b[at + 1] = static_cast<uint8_t>(h >> 8);
        }
    return b;
}

std::vector<float> gaussian(int64_t n, std::mt19937& rng, float sigma = 1.0f) {
    std::normal_distribution<float> nd(0.0f, sigma);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = nd(rng);
    return v;
}

double rel_rms(const std::vector<float>& got, const std::vector<float>& want) {
    double e = 0, s = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        e += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
        s += double(want[i]) * want[i];
    }
    return std::sqrt(e / s);
}

// A [rows, cols] weight of type t over the bytes b (kept alive by the caller).
TensorView view_of(DType t, int64_t rows, int64_t cols, const std::vector<uint8_t>& b) {
    TensorView v;
    v.name = "w";
    v.dtype = t;
    v.shape = {rows, cols};
    v.data = reinterpret_cast<const std::byte*>(b.data());
    v.nbytes = b.size();
    return v;
}

// w stored as t: rounded to BF16 / F16, or quantized to a block type.
std::vector<uint8_t> stored_as(DType t, const std::vector<float>& w) {
    const auto n = static_cast<int64_t>(w.size());
    std::vector<uint8_t> b(dtype_bytes(t, n));
    if (dtype_is_block(t)) {
        quant::quantize(t, w.data(), b.data(), n);
        return b;
    }
    for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = t == DType::BF16 ? f32_to_bf16(w[size_t(i)]) : f32_to_f16(w[size_t(i)]);
        std::memcpy(&b[size_t(2 * i)], &h, 2);
    }
    return b;
}

// This thread's CPU time in seconds (the hidden rate measurements: other processes take wall time, not this).
double cpu_now() {
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

bool same_bits(float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); }

}  // namespace

TEST_CASE("f16 -> f32 is exact for every one of the 65536 half values, subnormals included", "[quant]") {
    std::vector<uint8_t> all(2 * 65536);
    for (uint32_t h = 0; h < 65536; ++h) all[2 * h] = static_cast<uint8_t>(h & 0xff), all[2 * h + 1] = static_cast<uint8_t>(h >> 8);
    std::vector<float> widened(65536);
    quant::dequantize(DType::F16, all.data(), widened.data(), 65536);
    int64_t mismatches = 0;
    for (uint32_t h = 0; h < 65536; ++h) {
        const float want = ref_half(static_cast<uint16_t>(h));
        const float got = f16_to_f32(static_cast<uint16_t>(h));
        const bool ok = std::isnan(want) ? (std::isnan(got) && std::isnan(widened[h]))
                                         : (same_bits(got, want) && same_bits(widened[h], want));
        if (!ok) ++mismatches;
    }
    CHECK(mismatches == 0);
    CHECK(f16_to_f32(0x0001) == std::ldexp(1.0f, -24));   // the smallest subnormal
    CHECK(f16_to_f32(0x03ff) == std::ldexp(1023.0f, -24)); // the largest subnormal
    CHECK(same_bits(f16_to_f32(0x8000), -0.0f));
}

TEST_CASE("dequantize equals an independent decoder bit for bit on random blocks with extreme scales", "[quant]") {
    std::mt19937 rng(7);
    for (DType t : kTypes) {
        INFO(dtype_name(t));
        const int64_t nblocks = 40, n = nblocks * dtype_block_size(t);
        const std::vector<uint8_t> b = random_blocks(t, nblocks, rng);
        std::vector<float> got(static_cast<size_t>(n));
        quant::dequantize(t, b.data(), got.data(), n);
        int64_t mismatches = 0, subnormal_blocks = 0;
        for (int64_t i = 0; i < n; ++i)
            if (!same_bits(got[static_cast<size_t>(i)], ref_weight(t, b, i))) ++mismatches;
        for (int64_t k = 0; k < nblocks; ++k) {
            const uint16_t d = u16_at(b, static_cast<size_t>(k * dtype_block_bytes(t) + scale_offsets(t)[0]));
            subnormal_blocks += (d & 0x7c00) == 0 && (d & 0x3ff) != 0;
        }
        CHECK(mismatches == 0);
        CHECK(subnormal_blocks >= 8);  // the subnormal cases were really exercised
        quant::validate(t, b.data(), n, "random");  // finite scales: valid
        // Every block must also decode alone (no state carried between blocks).
        std::vector<float> one(static_cast<size_t>(dtype_block_size(t)));
        quant::dequantize(t, b.data() + 7 * dtype_block_bytes(t), one.data(), dtype_block_size(t));
        for (int64_t e = 0; e < dtype_block_size(t); ++e)
            CHECK(same_bits(one[static_cast<size_t>(e)], got[static_cast<size_t>(7 * dtype_block_size(t) + e)]));
    }
}

TEST_CASE("dot over block weights equals the dot of the dequantized weights", "[quant]") {
    std::mt19937 rng(11);
    for (DType t : kTypes) {
        INFO(dtype_name(t));
        // 768 = 3 super-blocks; 800 (Q8_0/Q4_0 only) ends in a partial 256-weight chunk.
        for (int64_t n : {int64_t(768), int64_t(800)}) {
            if (n % dtype_block_size(t)) continue;
            const std::vector<float> w = gaussian(n, rng, 0.05f);
            std::vector<uint8_t> b(dtype_bytes(t, n));
            quant::quantize(t, w.data(), b.data(), n);
            std::vector<float> deq(static_cast<size_t>(n));
            quant::dequantize(t, b.data(), deq.data(), n);
            const std::vector<float> x = gaussian(n, rng);
            double want = 0, mag = 0;
            for (int64_t i = 0; i < n; ++i) {
                want += double(deq[static_cast<size_t>(i)]) * x[static_cast<size_t>(i)];
                mag += std::fabs(double(deq[static_cast<size_t>(i)]) * x[static_cast<size_t>(i)]);
            }
            for (CpuIsa isa : supported_cpu_isas()) {  // each instruction set's kernels
                INFO(cpu_isa_name(isa) << " n " << n);
                const float got = quant::dot(t, b.data(), x.data(), n, isa);
                CHECK(std::fabs(got - want) <= 1e-6 * mag);
            }
        }
    }
}

// Measured on N(0, 1) weights (64 Ki per type, seed 3): relative RMS error Q8_0 0.0054, Q4_0 0.087, Q4_K 0.071,
// Q5_K 0.036, Q6_K 0.018. The bounds below leave ~15% headroom.
TEST_CASE("quantize -> dequantize stays within the error bound of each type", "[quant]") {
    struct Bound {
        DType t;
        double rel_rms;
    };
    const Bound bounds[] = {{DType::Q8_0, 0.0065}, {DType::Q4_0, 0.10}, {DType::Q4_K, 0.082},
                            {DType::Q5_K, 0.042}, {DType::Q6_K, 0.021}};
    std::mt19937 rng(3);
    const int64_t n = 65536;
    for (float sigma : {1.0f, 0.02f, 3e-5f}) {  // 3e-5: scales fall into the f16 subnormal range
        const std::vector<float> w = gaussian(n, rng, sigma);
        for (const Bound& bd : bounds) {
            INFO(dtype_name(bd.t) << " sigma " << sigma);
            std::vector<uint8_t> b(dtype_bytes(bd.t, n));
            quant::quantize(bd.t, w.data(), b.data(), n);
            quant::validate(bd.t, b.data(), n, "quantized");
            std::vector<float> back(static_cast<size_t>(n));
            quant::dequantize(bd.t, b.data(), back.data(), n);
            const double e = rel_rms(back, w);
            UNSCOPED_INFO(dtype_name(bd.t) << " sigma " << sigma << " rel rms " << e);
            // Tiny weights lose relative precision once the scales are f16 subnormals.
            CHECK(e < (sigma < 1e-4f ? 4 * bd.rel_rms : bd.rel_rms));
        }
    }
}

TEST_CASE("Q8_0 and Q4_0 errors are bounded per block by their scale", "[quant]") {
    std::mt19937 rng(5);
    const int64_t n = 32 * 512;
    const std::vector<float> w = gaussian(n, rng);
    for (DType t : {DType::Q8_0, DType::Q4_0}) {
        INFO(dtype_name(t));
        std::vector<uint8_t> b(dtype_bytes(t, n));
        quant::quantize(t, w.data(), b.data(), n);
        std::vector<float> back(static_cast<size_t>(n));
        quant::dequantize(t, b.data(), back.data(), n);
        // Q8_0: the nearest of 255 levels, |e| <= d/2. Q4_0: levels -8..7 with the extreme at -8, so a weight of
        // the opposite sign and equal magnitude clamps to 7: |e| <= d.
        const double k = t == DType::Q8_0 ? 0.5 : 1.0;
        double worst = 0;
        for (int64_t i = 0; i < n; ++i) {
            const double d = std::fabs(ref_half(u16_at(b, static_cast<size_t>(i / 32 * dtype_block_bytes(t)))));
            worst = std::max(worst, std::fabs(double(back[size_t(i)]) - w[size_t(i)]) / (k * d));
        }
        CHECK(worst <= 1.0 + 1e-3);
    }
}

TEST_CASE("special inputs quantize sensibly: zeros, constants, a spike, the largest representable", "[quant]") {
    for (DType t : kTypes) {
        INFO(dtype_name(t));
        const int64_t n = 256;
        std::vector<uint8_t> b(dtype_bytes(t, n));
        std::vector<float> back(n);
        std::vector<float> zeros(n, 0.0f);
        quant::quantize(t, zeros.data(), b.data(), n);
        quant::dequantize(t, b.data(), back.data(), n);
        for (float v : back) CHECK(v == 0.0f);

        std::vector<float> spike(n, 0.0f);
        spike[100] = -3.0f;
        quant::quantize(t, spike.data(), b.data(), n);
        quant::dequantize(t, b.data(), back.data(), n);
        CHECK(back[100] == Approx(-3.0f).epsilon(0.01));
        CHECK(back[99] == Approx(0.0f).margin(0.05));

        std::vector<float> big(n, 0.0f);
        for (int64_t i = 0; i < n; ++i) big[size_t(i)] = (i % 2 ? 1.0f : -1.0f) * 60000.0f * float(i % 7) / 6.0f;
        quant::quantize(t, big.data(), b.data(), n);
        quant::validate(t, b.data(), n, "big");
        quant::dequantize(t, b.data(), back.data(), n);
        CHECK(test::all_finite(back));
        CHECK(rel_rms(back, big) < 0.15);

        std::vector<float> bad(n, 0.0f);
        bad[3] = std::numeric_limits<float>::quiet_NaN();
        CHECK_THROWS_AS(quant::quantize(t, bad.data(), b.data(), n), InputError);
        bad[3] = 1e30f;
        CHECK_THROWS_AS(quant::quantize(t, bad.data(), b.data(), n), InputError);
        CHECK_THROWS_AS(quant::quantize(t, zeros.data(), b.data(), n - 1), Error);
    }
    std::vector<float> x(256, 0.0f);
    std::vector<uint8_t> b(1024);
    CHECK_THROWS_AS(quant::quantize(DType::BF16, x.data(), b.data(), 256), UnsupportedError);
}

TEST_CASE("blocks with NaN or infinite f16 scales are malformed: validate names the block and scale", "[quant]") {
    std::mt19937 rng(9);
    for (DType t : kTypes) {
        for (size_t s = 0; s < scale_offsets(t).size(); ++s) {
            for (uint16_t bad : {uint16_t(0x7c00), uint16_t(0xfc00), uint16_t(0x7e00), uint16_t(0x7c01)}) {
                INFO(dtype_name(t) << " scale " << s << " = " << bad);
                std::vector<uint8_t> b = random_blocks(t, 6, rng);
                const size_t at = static_cast<size_t>(4 * dtype_block_bytes(t) + scale_offsets(t)[s]);
                b[at] = static_cast<uint8_t>(bad & 0xff);
                b[at + 1] = static_cast<uint8_t>(bad >> 8);
                try {
                    quant::validate(t, b.data(), 6 * dtype_block_size(t), "blk.3.attn_q.weight");
                    FAIL("no error");
                } catch (const FormatError& e) {
                    const std::string msg = e.what();
                    CHECK(msg.find("blk.3.attn_q.weight") != std::string::npos);
                    CHECK(msg.find("block 4") != std::string::npos);
                    CHECK(msg.find((bad & 0x3ff) ? "NaN" : "infinite") != std::string::npos);
                    CHECK(msg.find(s == 0 ? "scale d " : "scale dmin") != std::string::npos);
                }
            }
        }
        std::vector<float> out(512);
        std::vector<uint8_t> b(2048);
        CHECK_THROWS_AS(quant::dequantize(t, b.data(), out.data(), dtype_block_size(t) + 1), Error);
    }
}

TEST_CASE("bits per weight of every type", "[quant]") {
    CHECK(quant::bits_per_weight(DType::F32) == 32.0);
    CHECK(quant::bits_per_weight(DType::BF16) == 16.0);
    CHECK(quant::bits_per_weight(DType::Q8_0) == 8.5);
    CHECK(quant::bits_per_weight(DType::Q4_0) == 4.5);
    CHECK(quant::bits_per_weight(DType::Q4_K) == 4.5);
    CHECK(quant::bits_per_weight(DType::Q5_K) == 5.5);
    CHECK(quant::bits_per_weight(DType::Q6_K) == 6.5625);
}

TEST_CASE("CPU matmul with block weights equals matmul with the dequantized weights", "[quant][cpu]") {
    std::mt19937 rng(13);
    auto backend = make_backend(BackendOptions{});
    const int64_t rows = 37, cols = 512;  // rows not a multiple of the kernels' 4- and 8-row groups
    for (DType t : kTypes) {
        INFO(dtype_name(t));
        const std::vector<float> w = gaussian(rows * cols, rng, 0.05f);
        std::vector<uint8_t> qb(dtype_bytes(t, rows * cols));
        quant::quantize(t, w.data(), qb.data(), rows * cols);
        std::vector<float> deq(static_cast<size_t>(rows * cols));
        quant::dequantize(t, qb.data(), deq.data(), rows * cols);

        const TensorView qv = view_of(t, rows, cols, qb);
        TensorView fv = qv;
        fv.dtype = DType::F32;
        fv.data = reinterpret_cast<const std::byte*>(deq.data());
        fv.nbytes = deq.size() * 4;

        for (int64_t T : {int64_t(1), int64_t(5)}) {  // decode (matvec) and prefill (row blocks x tiles)
            const std::vector<float> x = gaussian(T * cols, rng);
            Buf xb = backend->alloc(T * cols, "x"), a = backend->alloc(T * rows, "a"), b = backend->alloc(T * rows, "b");
            backend->begin();
            backend->write(xb, x);
            backend->matmul(a, xb, qv, T);
            backend->matmul(b, xb, fv, T);
            const Readback ra = backend->readback(a, T * rows), rb = backend->readback(b, T * rows);
            backend->submit();
            const std::vector<float> got = backend->fetch(ra), want = backend->fetch(rb);
            CHECK(test::rel_l2(got, want) < 1e-6);
            for (Buf z : {xb, a, b}) backend->free(z);
        }
    }
}

// Hidden (run with "[quantbench]"): single-thread CPU-time rate of the decode matmul per stored type, the figures in
// docs/performance.md ("Quantized weights (CPU)"). CPU time, so other processes on the machine matter less.
TEST_CASE("decode matmul rate per stored type (CPU time, one thread)", "[.bench][quantbench]") {
    std::mt19937 rng(1);
    const int64_t rows = 8192, cols = 2048, n = rows * cols;
    const std::vector<float> w = gaussian(n, rng, 0.02f), x = gaussian(cols, rng);
    // Each type on the exact path and on the integer-dot path (block types), with the best kernels of this CPU
    // and, for comparison, with the 256-bit vpdpbusd ones (avx-vnni), plain AVX2 and the generic ones.
    double bf16_s = 0;
    for (DType t : {DType::BF16, DType::F16, DType::Q8_0, DType::Q6_K, DType::Q5_K, DType::Q4_K, DType::Q4_0}) {
        const std::vector<uint8_t> b = stored_as(t, w);
        const TensorView v = view_of(t, rows, cols, b);
        for (bool exact : {true, false}) {
            if (!exact && !dtype_is_block(t) && t != DType::F16) continue;  // F16: binary16 activations
            for (CpuIsa isa : {best_cpu_isa(), CpuIsa::AvxVnni, CpuIsa::Avx2, CpuIsa::Generic}) {
                if (!cpu_isa_supported(isa) || (isa == CpuIsa::AvxVnni && isa == best_cpu_isa())) continue;
                if (!exact && !dtype_is_block(t) && isa == CpuIsa::Generic) continue;  // no binary16 kernel there
                BackendOptions o;
                o.threads = 1;
                o.exact = exact;
                o.cpu_isa = std::string(cpu_isa_name(isa));
                auto backend = make_backend(o);
                Buf xb = backend->alloc(cols, "x"), ob = backend->alloc(rows, "out");
                backend->begin();
                backend->write(xb, x);
                backend->submit();
                double best = 1e9;
                for (int r = 0; r < 7; ++r) {
                    const double t0 = cpu_now();
                    backend->begin();
                    backend->matmul(ob, xb, v, 1);
                    backend->submit();
                    best = std::min(best, cpu_now() - t0);
                }
                if (t == DType::BF16) bf16_s = best;
                WARN(dtype_name(t) << (exact ? " exact " : t == DType::F16 ? " binary16 x " : " integer-dot ")
                                   << cpu_isa_name(isa) << ": " << double(b.size()) / 1e9 / best << " GB/s, "
                                   << double(n) / 1e9 / best << " G weights/s per CPU-second; " << bf16_s / best
                                   << "x bf16");
            }
        }
    }
}

// ---------- the integer-dot path (quant::quantize_activations, quant::dot_q8) ----------

namespace {

// Activations with every kind of 32-block: gaussian, all zero, one huge element, all at +-max, tiny.
std::vector<float> activation_blocks(int64_t n, std::mt19937& rng) {
    std::vector<float> x = gaussian(n, rng);
    for (int64_t k = 0; k < n / 32; ++k) {
        float* b = x.data() + 32 * k;
        switch (k % 5) {
            case 1: std::fill(b, b + 32, 0.0f); break;
            case 2: b[rng() % 32] = 1e4f; break;
            case 3:
                for (int i = 0; i < 32; ++i) b[i] = (rng() & 1) ? 3.0f : -3.0f;  // every level +-127
                break;
            case 4:
                for (int i = 0; i < 32; ++i) b[i] *= 1e-30f;
                break;
            default: break;
        }
    }
    return x;
}

}  // namespace

TEST_CASE("activations quantize to 8-bit blocks of 32: d = max|x| / 127, q = round(x / d), block sums", "[quant][q8]") {
    std::mt19937 rng(11);
    const int64_t n = 32 * 40;
    const std::vector<float> x = activation_blocks(n, rng);
    quant::Q8Activations a;
    quant::quantize_activations(x.data(), n, a);
    REQUIRE(a.n == n);
    for (int64_t k = 0; k < n / 32; ++k) {
        float amax = 0;
        for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[size_t(32 * k + i)]));
        INFO("block " << k);
        CHECK(a.d[size_t(k)] == amax / 127.0f);
        for (int i = 0; i < 8; ++i) CHECK(a.d8[size_t(8 * k + i)] == a.d[size_t(k)]);
        int sum = 0;
        for (int i = 0; i < 32; ++i) {
            const float v = x[size_t(32 * k + i)];
            const int q = a.q[size_t(32 * k + i)];
            sum += q;
            CHECK(std::abs(q) <= 127);
            CHECK(int(a.qu[size_t(32 * k + i)]) == q + 128);
            if (amax > 0) CHECK(std::fabs(float(q) - v * (127.0f / amax)) <= 0.5f);
            else CHECK(q == 0);
        }
        CHECK(a.sum32[size_t(k)] == a.d[size_t(k)] * float(sum));
        for (int i = 0; i < 16; ++i)
            CHECK(a.pair32[size_t(16 * k + i)] == 32 * (a.q[size_t(32 * k + 2 * i)] + a.q[size_t(32 * k + 2 * i + 1)]));
    }
    // qk: q with the middle quarters of each 64 elements swapped (what the 256-bit K kernels read); a last 32 of
    // an odd number of blocks as it is.
    auto swapped = [](int64_t i) {
        const int64_t j = i % 64;
        return i - j + (j >= 16 && j < 32 ? j + 16 : j >= 32 && j < 48 ? j - 16 : j);
    };
    for (int64_t i = 0; i < n; ++i) CHECK(a.qk[size_t(i)] == a.q[size_t(swapped(i))]);
    quant::Q8Activations odd;
    quant::quantize_activations(x.data(), 96, odd);
    for (int64_t i = 0; i < 96; ++i) CHECK(odd.qk[size_t(i)] == odd.q[size_t(i < 64 ? swapped(i) : i)]);
    // dk: d with each 8 blocks in the order 0, 2, 4, 6, 1, 3, 5, 7 (the 256-bit K kernels' scale order); a last
    // part of 8 as it is (40 blocks: five whole parts; 3 blocks: one part of 3).
    const int order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
    REQUIRE(a.dk.size() == a.d.size());
    for (int64_t k = 0; k < n / 32; ++k) CHECK(a.dk[size_t(k)] == a.d[size_t(k - k % 8 + order[k % 8])]);
    REQUIRE(odd.dk.size() == 3);
    for (int k = 0; k < 3; ++k) CHECK(odd.dk[size_t(k)] == odd.d[size_t(k)]);
    // The rounding error is at most half a level per element: relative RMS ~0.3% for gaussian blocks.
    std::vector<float> y(x.size());
    for (int64_t i = 0; i < n; ++i) y[size_t(i)] = a.d[size_t(i / 32)] * float(a.q[size_t(i)]);
    CHECK(rel_rms(std::vector<float>(y.begin(), y.begin() + 32), std::vector<float>(x.begin(), x.begin() + 32)) < 0.01);
    std::vector<float> bad(64, 1.0f);
    bad[40] = std::numeric_limits<float>::infinity();
    quant::quantize_activations(bad.data(), 64, a);
    CHECK(std::isfinite(a.d[0]));
    CHECK(std::isnan(a.d[1]));
    CHECK(std::all_of(a.pair32.begin() + 16, a.pair32.end(), [](int16_t v) { return v == 0; }));
    CHECK(std::all_of(a.qu.begin() + 32, a.qu.end(), [](uint8_t v) { return v == 128; }));
    CHECK_THROWS_AS(quant::quantize_activations(bad.data(), 48, a), Error);
    // NaN as well (which std::max passes over): one NaN among finite values, a block of NaN, a negative NaN.
    // Each such block's scale is NaN, so every dot product over it is NaN on every instruction set, as on the
    // exact path, and the finite blocks around them are untouched.
    std::vector<float> nan(128, 1.0f);
    nan[5] = std::numeric_limits<float>::quiet_NaN();
    std::fill(nan.begin() + 32, nan.begin() + 64, std::numeric_limits<float>::quiet_NaN());
    nan[100] = -std::numeric_limits<float>::quiet_NaN();
    quant::quantize_activations(nan.data(), 128, a);
    CHECK(std::isnan(a.d[0]));
    CHECK(std::isnan(a.d[1]));
    CHECK(a.d[2] == 1.0f / 127.0f);
    CHECK(std::isnan(a.d[3]));
    CHECK(std::isnan(a.sum32[0]));
    // Ties round to even (the levels of 0.5, 1.5, 2.5, ... with amax 127: d = 1, x / d exactly halfway).
    quant::Q8Activations t8;
    std::vector<float> ties(32);
    for (int i = 0; i < 32; ++i) ties[size_t(i)] = (i % 2 ? -1.0f : 1.0f) * (float(i) + 0.5f);
    ties[31] = 127.0f;
    quant::quantize_activations(ties.data(), 32, t8);
    REQUIRE(t8.d[0] == 1.0f);
    for (int i = 0; i < 31; ++i) {
        INFO("element " << i);
        CHECK(t8.q[size_t(i)] == (i % 2 ? -(i + 1) : i));  // i + 0.5 to the even one of i and i + 1
    }
    // Blocks so small that 127 / max|x| overflows (max|x| below ~3.7e-37, down to subnormals): the levels are
    // x / d rounded and clamped to +-127 (d is then subnormal, a few bits), the sums exact; a d that rounds to 0
    // leaves levels of 0. (x * inf used to give levels of 0 and an int sum that overflowed.)
    for (float scale : {1e-38f, 1e-40f, 1e-42f, 1e-44f}) {
        std::vector<float> tiny = gaussian(64, rng);
        for (float& v : tiny) v *= scale;
        quant::quantize_activations(tiny.data(), 64, t8);
        for (int k = 0; k < 2; ++k) {
            float amax = 0;
            for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(tiny[size_t(32 * k + i)]));
            const float d = t8.d[size_t(k)];
            INFO("scale " << scale << ", block " << k << ", d " << d);
            REQUIRE(d == amax / 127.0f);
            int sum = 0;
            for (int i = 0; i < 32; ++i) {
                const int q = t8.q[size_t(32 * k + i)];
                const float want = d > 0 ? std::clamp(tiny[size_t(32 * k + i)] / d, -127.0f, 127.0f) : 0.0f;
                sum += q;
                CHECK(std::fabs(float(q) - want) <= 0.5f);
            }
            CHECK(t8.sum32[size_t(k)] == d * float(sum));
            if (d > 0) CHECK(std::count(t8.q.begin() + 32 * k, t8.q.begin() + 32 * k + 32, int8_t(0)) < 32);
        }
    }
    std::vector<float> ones(128, 0.5f);
    std::vector<uint8_t> row(size_t(dtype_bytes(DType::Q8_0, 128)));
    quant::quantize(DType::Q8_0, ones.data(), row.data(), 128);
    for (CpuIsa isa : supported_cpu_isas()) {
        INFO(cpu_isa_name(isa));
        CHECK(std::isnan(quant::dot_q8(DType::Q8_0, row.data(), a, 0, 128, isa)));
        CHECK(quant::dot_q8(DType::Q8_0, row.data(), a, 64, 32, isa) == Approx(16.0f).epsilon(1e-3));  // finite
    }
}

TEST_CASE("every instruction set quantizes activations to the same bytes", "[quant][q8]") {
    // Blocks of every kind, magnitudes from subnormal to near FLT_MAX, exact ties, NaN and infinities: the AVX2
    // loop must give the generic one's levels, scales and sums bit for bit (the kernels and the documented error
    // of the integer-dot path assume one quantization).
    std::mt19937 rng(29);
    const int64_t n = 32 * 3000;
    std::vector<float> x = activation_blocks(n, rng);
    std::uniform_real_distribution<float> exponent(-44.0f, 38.0f);
    for (int64_t k = 0; k < n / 32; k += 3) {
        const float scale = std::pow(10.0f, exponent(rng));
        for (int i = 0; i < 32; ++i) x[size_t(32 * k + i)] *= scale;  // some overflow to +-inf: their own case
    }
    for (int64_t k = 1; k < n / 32; k += 7) {  // exact ties: max|x| = 127, so x / d = x
        for (int i = 0; i < 31; ++i) x[size_t(32 * k + i)] = float(int(rng() % 253) - 126) + 0.5f;
        x[size_t(32 * k + 31)] = 127.0f;
    }
    x[size_t(32 * 11 + 4)] = std::numeric_limits<float>::quiet_NaN();
    x[size_t(32 * 12 + 9)] = -std::numeric_limits<float>::infinity();
    x[size_t(32 * 13 + 0)] = 3e38f;
    const auto bytes = [](const auto& v) {
        const auto* p = reinterpret_cast<const uint8_t*>(v.data());
        return std::vector<uint8_t>(p, p + v.size() * sizeof(v[0]));
    };
    quant::Q8Activations want, got;
    quant::quantize_activations(x.data(), n, want, CpuIsa::Generic);
    for (CpuIsa isa : supported_cpu_isas()) {
        INFO(cpu_isa_name(isa));
        quant::quantize_activations(x.data(), n, got, isa);
        CHECK(bytes(got.q) == bytes(want.q));
        CHECK(bytes(got.d) == bytes(want.d));
        CHECK(bytes(got.sum32) == bytes(want.sum32));
        CHECK(bytes(got.pair32) == bytes(want.pair32));
        CHECK(bytes(got.qu) == bytes(want.qu));
        CHECK(bytes(got.qk) == bytes(want.qk));
        CHECK(bytes(got.qv) == bytes(want.qv));
        CHECK(bytes(got.dk) == bytes(want.dk));
        CHECK(bytes(got.d8) == bytes(want.d8));
    }
}

// The same quantized math, written out in double: sum over weights of the reference decoder's w[i] (the scalar
// decoder at the top of this file) times the dequantized activation d[i / 32] * q[i]. Every ISA's kernel sums the
// integer products exactly, so the only differences left are float32 roundings of the scale products and of the
// accumulation: far below one level of one product (which would be ~1 / (127 * 256) of sum |w x| here).
TEST_CASE("integer-dot kernels of every instruction set equal the quantized math (random blocks, all scale kinds)",
          "[quant][q8]") {
    std::mt19937 rng(12);
    const std::vector<CpuIsa> isas = supported_cpu_isas();
    for (CpuIsa isa : isas) WARN("integer-dot kernels tested: " << cpu_isa_name(isa));
    for (DType t : kTypes)
    // One K super-block or eight Q8_0/Q4_0 blocks per row; then two super-blocks, or 25 blocks (an odd count: the
    // last one outside the two-block steps).
    for (const int64_t n : {int64_t(256), dtype_block_size(t) == 32 ? int64_t(800) : int64_t(512)}) {
        const int64_t rows = 60;
        const int64_t nblocks = rows * n / dtype_block_size(t);
        const std::vector<uint8_t> w = random_blocks(t, nblocks, rng);
        const int64_t tokens = 3;
        const std::vector<float> x = activation_blocks(tokens * n, rng);
        quant::Q8Activations a;
        quant::quantize_activations(x.data(), tokens * n, a);
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t tok = 0; tok < tokens; ++tok) {
                double want = 0, mag = 0;
                for (int64_t i = 0; i < n; ++i) {
                    const double wi = ref_weight(t, w, r * n + i);
                    const int64_t j = tok * n + i;
                    const double xi = double(a.d[size_t(j / 32)]) * a.q[size_t(j)];
                    want += wi * xi;
                    mag += std::fabs(wi * xi);
                }
                const uint8_t* row = w.data() + r * dtype_bytes(t, n);
                for (CpuIsa isa : isas) {
                    const float got = quant::dot_q8(t, row, a, tok * n, n, isa);
                    INFO(dtype_name(t) << " row " << r << " token " << tok << " " << cpu_isa_name(isa) << ": got " << got
                                       << ", want " << want << ", sum|wx| " << mag);
                    CHECK(std::fabs(double(got) - want) <= 2e-6 * mag + 1e-30);
                }
            }
    }
    std::vector<uint8_t> q8(34 * 2);
    CHECK_THROWS_AS(quant::dot_q8(DType::Q8_0, q8.data(), quant::Q8Activations{}, 0, 64, CpuIsa::Generic), Error);
    CHECK_THROWS_AS(quant::dot_q8(DType::BF16, q8.data(), quant::Q8Activations{}, 0, 0, CpuIsa::Generic), Error);
    // A K-type row starts at a multiple of 256 in the activations (the 256-bit kernels read qk's order, which
    // holds from the start in 64s): one 32 block on is refused, not read in the wrong order.
    const std::vector<float> xs(512, 0.5f);
    quant::Q8Activations a512;
    quant::quantize_activations(xs.data(), 512, a512);
    std::vector<uint8_t> k4(size_t(dtype_bytes(DType::Q4_K, 256)));
    for (CpuIsa isa : isas) {
        CHECK_NOTHROW(quant::dot_q8(DType::Q4_K, k4.data(), a512, 256, 256, isa));
        CHECK_THROWS_AS(quant::dot_q8(DType::Q4_K, k4.data(), a512, 32, 256, isa), Error);
    }
}

namespace {
// quant::dot_q8_matrix over random rows x cols weights of type t against T random token rows equals dot_q8 of
// each row and token, bit for bit, with every instruction set's kernels; with group > 1 over the same rows stored
// in groups (quant::interleave_rows), rows [group, rows) of them.
void matrix_equals_dot_q8(DType t, int64_t rows, int64_t cols, int64_t T, std::mt19937& rng, int group = 1) {
    std::vector<uint8_t> b(size_t(dtype_bytes(t, rows * cols)));
    const std::vector<float> w = gaussian(rows * cols, rng, 0.02f), x = gaussian(T * cols, rng);
    quant::quantize(t, w.data(), b.data(), rows * cols);
    std::vector<uint8_t> stored = b;
    if (group > 1) quant::interleave_rows(t, b.data(), rows, cols, group, stored.data());
    quant::Q8Activations a;
    quant::quantize_activations(x.data(), T * cols, a);
    const int64_t r0 = group > 1 ? group : 0;
    for (CpuIsa isa : supported_cpu_isas()) {
        std::vector<float> out(T * rows, -1.0f);
        quant::dot_q8_matrix(t, stored.data(), r0, rows, a, T, cols, isa, out.data(), rows, group);
        INFO(dtype_name(t) << " " << rows << " x " << cols << ", " << T << " tokens, " << cpu_isa_name(isa)
                           << ", groups of " << group);
        for (int64_t tok = 0; tok < T; ++tok)
            for (int64_t r = 0; r < rows; ++r) {
                const uint8_t* row = b.data() + r * dtype_bytes(t, cols);
                const float want = r < r0 ? -1.0f : quant::dot_q8(t, row, a, tok * cols, cols, isa);
                CHECK(out[size_t(tok * rows + r)] == want);
            }
    }
}
}  // namespace

TEST_CASE("the CPU backend's integer-dot path matches quant::dot_q8 and is close to the exact path", "[quant][q8]") {
    std::mt19937 rng(13);
    const int64_t rows = 37, cols = 768;  // prefill tiles: more than one 512-column pass
    const std::vector<float> wf = gaussian(rows * cols, rng, 0.02f);
    for (DType t : kTypes) {
        std::vector<uint8_t> b(dtype_bytes(t, rows * cols));
        quant::quantize(t, wf.data(), b.data(), rows * cols);
        const TensorView v = view_of(t, rows, cols, b);
        for (int64_t T : {1, 5, 13}) {
            const std::vector<float> x = gaussian(T * cols, rng);
            auto run = [&](bool exact, const std::string& isa) {
                BackendOptions o;
                o.threads = 2;
                o.exact = exact;
                o.cpu_isa = isa;
                auto backend = make_backend(o);
                Buf xb = backend->alloc(T * cols, "x"), ob = backend->alloc(T * rows, "out");
                backend->begin();
                backend->write(xb, x);
                backend->matmul(ob, xb, v, T);
                const Readback r = backend->readback(ob, T * rows);
                backend->submit();
                return backend->fetch(r);
            };
            const std::vector<float> exact = run(true, "");
            for (CpuIsa isa : supported_cpu_isas()) {  // the exact path's own kernels per instruction set
                INFO(dtype_name(t) << " T = " << T << " exact " << cpu_isa_name(isa));
                CHECK(test::rel_l2(run(true, std::string(cpu_isa_name(isa))), exact) < 1e-6);
            }
            quant::Q8Activations a;
            quant::quantize_activations(x.data(), T * cols, a);
            for (CpuIsa isa : supported_cpu_isas()) {
                const std::vector<float> fast = run(false, std::string(cpu_isa_name(isa)));
                INFO(dtype_name(t) << " T = " << T << " " << cpu_isa_name(isa));
                for (int64_t tok = 0; tok < T; ++tok)
                    for (int64_t r = 0; r < rows; ++r)
                        CHECK(fast[size_t(tok * rows + r)] ==
                              quant::dot_q8(t, b.data() + r * dtype_bytes(t, cols), a, tok * cols, cols, isa));
                // 8-bit activations: ~0.3% relative error per product, averaged down over 512 terms.
                CHECK(test::rel_l2(fast, exact) < 0.01);
            }
        }
    }
    // Q8_0 and Q4_0 rows whose block count is odd (the last block outside the 512-bit pairs), Q8_0's in pairs and
    // alone (an odd number of rows): still dot_q8's bits. 77 blocks: the 256-bit prefill's scale products in a
    // chunk of 64 and one of 13 (eight at a time, then five alone). 13 tokens: Q4_0 rows widened into Q8_0
    // blocks (widen_row), the last group a single token.
    for (DType t : {DType::Q8_0, DType::Q4_0}) {
        matrix_equals_dot_q8(t, 5, 32 * 25, 6, rng);
        matrix_equals_dot_q8(t, 5, 32 * 77, 7, rng);
        matrix_equals_dot_q8(t, 5, 32 * 77, 13, rng);
    }
    // A prompt long enough for a prefill's tokens to go in tiles (of kTokenTileBytes, at least 32 tokens, equal in
    // size, in groups of four: here 52, 52 and 46 tokens of 4096 weights): still dot_q8's bits for every token.
    for (DType t : kTypes) matrix_equals_dot_q8(t, 3, 4096, 150, rng);
    // 25 tokens: widened rows of every type (Q6_K from 24 tokens, widen_row), the last group a single token.
    for (DType t : kTypes) matrix_equals_dot_q8(t, 3, 512, 25, rng);
    // One token (decode), seven rows in one range: still dot_q8's bits.
    for (DType t : kTypes) matrix_equals_dot_q8(t, 7, 512, 1, rng);
    // Rows stored in groups (interleave_rows): kGroupRows of a K type in decode are what the 512-bit and 256-bit
    // kernels read as one stream (decode_group); any other group, type, the generic kernels or a prefill read rows
    // copied back. Each is still dot_q8's bits on the rows as they were. 14336 columns: ffn_down's row, whose
    // activations overflow L1.
    for (DType t : kTypes)
        for (int group : {quant::kGroupRows, 2, 8})
            for (int64_t T : {1, 5}) matrix_equals_dot_q8(t, 3 * group, 768, T, rng, group);
    for (DType t : {DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
        matrix_equals_dot_q8(t, 2 * quant::kGroupRows, 14336, 1, rng, quant::kGroupRows);
        matrix_equals_dot_q8(t, 4 * quant::kGroupRows, 4096, 150, rng, quant::kGroupRows);  // prefill, in tiles
        CHECK(quant::decode_group(t, 14336, CpuIsa::Avx512Vnni) == quant::kGroupRows);
        CHECK(quant::decode_group(t, 4096, CpuIsa::Avx512Vnni) == 1);
        CHECK(quant::decode_group(t, 14336, CpuIsa::Avx2) == quant::kGroupRows);
        CHECK(quant::decode_group(t, 14336, CpuIsa::Generic) == 1);
    }
    {  // a range that splits a group, and groups that do not divide the rows, are refused
        std::vector<uint8_t> k4(size_t(dtype_bytes(DType::Q4_K, 8 * 256)));
        std::vector<float> xs(256, 0.5f), out(8);
        quant::Q8Activations a;
        quant::quantize_activations(xs.data(), 256, a);
        const auto product = [&](int64_t r0, int group) {
            quant::dot_q8_matrix(DType::Q4_K, k4.data(), r0, 8, a, 1, 256, CpuIsa::Generic, out.data(), 8, group);
        };
        CHECK_NOTHROW(product(4, 4));
        CHECK_THROWS_AS(product(2, 4), Error);
        CHECK_THROWS_AS(product(0, 0), Error);
        std::vector<uint8_t> dst(k4.size());
        CHECK_THROWS_AS(quant::interleave_rows(DType::Q4_K, k4.data(), 6, 256, 4, dst.data()), Error);
    }
    BackendOptions bad;
    bad.cpu_isa = "sse9";
    CHECK_THROWS_AS(make_backend(bad), InputError);
}

// Hidden (run with "[prefillbench]"): single-thread CPU-time GFLOP/s of a 64-token prefill matmul per stored type
// and path (docs/performance.md). CPU time, so other processes on the machine matter less.
TEST_CASE("prefill matmul GFLOP/s per stored type (CPU time, one thread)", "[.bench][prefillbench]") {
    std::mt19937 rng(2);
    const int64_t rows = 2048, cols = 2048, n = rows * cols, T = 64;
    const std::vector<float> w = gaussian(n, rng, 0.02f), x = gaussian(T * cols, rng);
    for (DType t : {DType::BF16, DType::F16, DType::Q8_0, DType::Q4_K, DType::Q6_K}) {
        const std::vector<uint8_t> b = stored_as(t, w);
        const TensorView v = view_of(t, rows, cols, b);
        for (bool exact : {true, false})
          for (CpuIsa isa : supported_cpu_isas()) {
            if (!exact && !dtype_is_block(t)) continue;
            // Block types on this CPU's best kernels and on AVX2 (the kernels of an AVX2-only machine).
            if (isa != best_cpu_isa() && (isa == CpuIsa::Generic || (dtype_is_block(t) && isa != CpuIsa::Avx2)))
                continue;
            BackendOptions o;
            o.threads = 1;
            o.exact = exact;
            o.cpu_isa = std::string(cpu_isa_name(isa));
            auto backend = make_backend(o);
            Buf xb = backend->alloc(T * cols, "x"), ob = backend->alloc(T * rows, "out");
            backend->begin();
            backend->write(xb, x);
            backend->submit();
            double best = 1e9;
            for (int r = 0; r < 5; ++r) {
                const double t0 = cpu_now();
                backend->begin();
                backend->matmul(ob, xb, v, T);
                backend->submit();
                best = std::min(best, cpu_now() - t0);
            }
            WARN(dtype_name(t) << (exact ? " exact " : " integer-dot ") << cpu_isa_name(isa) << ": "
                               << 2.0 * double(n) * double(T) / 1e9 / best << " GFLOP/s per CPU-second");
        }
    }
}
