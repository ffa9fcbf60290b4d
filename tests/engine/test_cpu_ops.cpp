// Every CPU op against a naive double-precision implementation written here, on random inputs of odd sizes,
// with weights stored as F32, F16 and BF16 (and Hugging Face's permuted q/k rows).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numbers>
#include <random>

#include "catch.hpp"
#include "strata/backend.hpp"
#include "strata/cpu_isa.hpp"
#include "strata/error.hpp"
#include "strata/model.hpp"
#include "strata/quant.hpp"
#include "support.hpp"

using namespace strata;

namespace {

// A model with only a config and the weights a test hands it, in bytes the test owns.
struct OpModel {
    std::vector<std::vector<std::byte>> storage;
    Model model;

    explicit OpModel(int64_t head_dim = 8, int64_t n_heads = 4, int64_t n_kv_heads = 2) {
        ModelConfig& c = model.config;
        c.head_dim = head_dim;
        c.n_heads = n_heads;
        c.n_kv_heads = n_kv_heads;
        c.dim = n_heads * head_dim;
        c.n_layers = 1;
        c.hidden_dim = 3 * c.dim;
        c.vocab_size = 50;
        c.bos_id = 0;
        c.rope_theta = 10000.0f;
    }

    // A tensor of `shape` holding `values` rounded to `dtype`; returns the values it really holds, in stored
    // (physical) order.
    std::vector<double> add(const std::string& name, DType dtype, std::vector<int64_t> shape,
                            const std::vector<float>& values, int32_t rope_heads = 0) {
        std::vector<std::byte> bytes(dtype_bytes(dtype, static_cast<int64_t>(values.size())));
        std::vector<double> held(values.size());
        for (size_t i = 0; i < values.size(); ++i) {
            if (dtype == DType::F32) {
                std::memcpy(bytes.data() + 4 * i, &values[i], 4);
                held[i] = values[i];
            } else {
                const uint16_t h = dtype == DType::F16 ? f32_to_f16(values[i]) : f32_to_bf16(values[i]);
                std::memcpy(bytes.data() + 2 * i, &h, 2);
                held[i] = dtype == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
            }
        }
        keep(name, dtype, std::move(shape), std::move(bytes), rope_heads);
        return held;
    }
    const TensorView& tensor(const std::string& name) const { return model.tensors.at(name); }

    // A block-type tensor (quant::quantize of `values`).
    void add_blocks(const std::string& name, DType dtype, std::vector<int64_t> shape,
                    const std::vector<float>& values) {
        std::vector<std::byte> bytes(dtype_bytes(dtype, static_cast<int64_t>(values.size())));
        quant::quantize(dtype, values.data(), bytes.data(), static_cast<int64_t>(values.size()));
        keep(name, dtype, std::move(shape), std::move(bytes));
    }

    // The tensor `name` over `bytes`, which the model keeps.
    void keep(const std::string& name, DType dtype, std::vector<int64_t> shape, std::vector<std::byte> bytes,
              int32_t rope_heads = 0) {
        storage.push_back(std::move(bytes));
        TensorView t;
        t.name = name;
        t.dtype = dtype;
        t.shape = std::move(shape);
        t.data = storage.back().data();
        t.nbytes = storage.back().size();
        t.rope_heads = rope_heads;
        model.tensors[name] = t;
    }
};

std::vector<float> random_values(size_t n, uint32_t seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

struct Run {
    std::unique_ptr<Backend> b;
    explicit Run(const Model& m, int threads = 0, std::string cpu_isa = "", bool exact = true) {
        BackendOptions o;
        o.name = "cpu";
        o.threads = threads;
        o.cpu_isa = std::move(cpu_isa);
        o.exact = exact;
        b = make_backend(o);
        b->load(m);
    }
    Buf upload(const std::vector<float>& v) {
        Buf buf = b->alloc(static_cast<int64_t>(v.size()), "test");
        b->write(buf, v);
        return buf;
    }
    std::vector<float> read(Buf buf, int64_t n) {
        b->begin();
        Readback r = b->readback(buf, n);
        b->submit();
        return b->fetch(r);
    }
    // x [T, w.cols()] times w's rows: [T, w.rows()].
    std::vector<float> matmul(const TensorView& w, const std::vector<float>& x, int64_t T) {
        Buf xb = upload(x);
        Buf out = b->alloc(T * w.rows(), "out");
        b->begin();
        b->matmul(out, xb, w, T);
        b->submit();
        return read(out, T * w.rows());
    }
};

// The same product in double: held [rows, cols] (the stored values) times x [T, cols], as [T, rows].
std::vector<double> reference_matmul(const std::vector<double>& held, const std::vector<float>& x, int64_t rows,
                                     int64_t cols, int64_t T) {
    std::vector<double> want(size_t(T * rows));
    for (int64_t t = 0; t < T; ++t)
        for (int64_t r = 0; r < rows; ++r) {
            double s = 0;
            for (int64_t i = 0; i < cols; ++i) s += held[size_t(r * cols + i)] * x[size_t(t * cols + i)];
            want[size_t(t * rows + r)] = s;
        }
    return want;
}

// Relative L2 error against a double reference.
double rel_err(const std::vector<float>& got, const std::vector<double>& want) {
    return test::rel_l2(got, std::vector<float>(want.begin(), want.end()));
}

const char* dtype_label(DType t) { return t == DType::F32 ? "F32" : t == DType::F16 ? "F16" : "BF16"; }

}  // namespace

TEST_CASE("cpu matmul matches a double reference for every stored type and T", "[cpu]") {
    // Every instruction set this CPU has (the F16 decode kernel differs per set: 8-wide F16C, 16-wide AVX-512).
    for (CpuIsa isa : supported_cpu_isas()) {
        for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
            // Odd sizes: rows not a multiple of the 4-row or 8-row blocks, columns not a multiple of 8, 16 or 32.
            for (auto [rows, cols] : {std::pair<int64_t, int64_t>{37, 67}, {13, 200}, {64, 33}, {5, 3}}) {
                for (int64_t T : {1, 2, 5, 9}) {
                    OpModel om;
                    const auto held = om.add("w", dtype, {rows, cols}, random_values(size_t(rows * cols), 11, 0.5f));
                    const auto x = random_values(size_t(T * cols), 12);
                    Run run(om.model, 0, std::string(cpu_isa_name(isa)));
                    const auto got = run.matmul(om.tensor("w"), x, T);
                    const auto want = reference_matmul(held, x, rows, cols, T);
                    INFO(cpu_isa_name(isa) << " " << dtype_label(dtype) << " rows " << rows << " cols " << cols
                                           << " T " << T);
                    CHECK(rel_err(got, want) < 1e-6);
                }
            }
        }
    }
}

// A long prompt's tokens go through the float kernels in tiles (here three of 72, 72 and 56 tokens: at least 96
// tokens a tile, of equal size in multiples of 12), each tile against every block of rows: a tile's tokens give
// the bits they give computed alone, and all are close to a double reference (a wrong tile offset in x or out,
// or a tile skipped, fails).
TEST_CASE("cpu prefill of a long prompt in token tiles: a tile's tokens as computed alone, close to a double "
          "reference", "[cpu]") {
    const int64_t rows = 11, cols = 2056, T = 200;  // a partial block of rows, columns past the 16-wide steps
    OpModel om;
    const auto held = om.add("w", DType::F16, {rows, cols}, random_values(size_t(rows * cols), 41, 0.5f));
    const auto x = random_values(size_t(T * cols), 42);
    const auto want = reference_matmul(held, x, rows, cols, T);
    for (CpuIsa isa : supported_cpu_isas()) {
        Run run(om.model, 2, std::string(cpu_isa_name(isa)));
        auto product = [&](int64_t t0, int64_t n) {  // tokens [t0, t0 + n) as one prompt
            const std::vector<float> xs(x.begin() + t0 * cols, x.begin() + (t0 + n) * cols);
            return run.matmul(om.tensor("w"), xs, n);
        };
        const std::vector<float> all = product(0, T), middle = product(72, 72), last = product(144, 56);
        INFO(cpu_isa_name(isa));
        CHECK(rel_err(all, want) < 1e-6);
        CHECK(std::equal(middle.begin(), middle.end(), all.begin() + 72 * rows));
        CHECK(std::equal(last.begin(), last.end(), all.begin() + 144 * rows));
    }
}

// The fast path (BackendOptions::exact = false) decodes F16 weights with x rounded to binary16 once per matmul,
// as llama.cpp does, after scaling x by the power of two that puts its largest element in [16384, 32768): the
// result is the double dot product with those halves, to float32 rounding, for activations of any size. Where x
// holds Inf or NaN the matmul takes the exact path.
TEST_CASE("cpu fast-path F16 decode: x scaled and rounded to binary16, the exact path for Inf / NaN", "[cpu]") {
    for (CpuIsa isa : supported_cpu_isas()) {
        for (auto [rows, cols] : {std::pair<int64_t, int64_t>{37, 67}, {13, 200}, {64, 33}, {5, 3}, {3, 1000}}) {
            OpModel om;
            const auto held = om.add("w", DType::F16, {rows, cols}, random_values(size_t(rows * cols), 13, 0.5f));
            Run fast(om.model, 0, std::string(cpu_isa_name(isa)), false);
            Run exact(om.model, 0, std::string(cpu_isa_name(isa)));
            auto product = [&](Run& run, const std::vector<float>& xv) {
                Buf xb = run.upload(xv);
                Buf out = run.b->alloc(rows, "out");
                run.b->begin();
                run.b->matmul(out, xb, om.tensor("w"), 1);
                run.b->submit();
                return run.read(out, rows);
            };
            // Activations far below binary16's normal range, ordinary ones, and ones beyond its largest value.
            for (float size : {1e-7f, 1.0f, 3e6f}) {
                std::vector<float> x = random_values(size_t(cols), 14, size);
                float amax = 0;
                for (float v : x) amax = std::max(amax, std::fabs(v));
                const double s = std::ldexp(1.0, 14 - std::ilogb(amax));
                std::vector<double> want(static_cast<size_t>(rows));
                for (int64_t r = 0; r < rows; ++r)
                    for (int64_t i = 0; i < cols; ++i)
                        want[size_t(r)] += held[size_t(r * cols + i)] *
                                           double(f16_to_f32(f32_to_f16(float(x[size_t(i)] * s)))) / s;
                INFO(cpu_isa_name(isa) << " rows " << rows << " cols " << cols << " |x| ~ " << size);
                const std::vector<float> got = product(fast, x), reference = product(exact, x);
                if (isa == CpuIsa::Generic) {
                    CHECK(got == reference);  // no binary16 kernel: the exact path
                } else {
                    CHECK(rel_err(got, want) < 1e-6);
                    if (cols > 3) CHECK(got != reference);  // the rounding of x shows: the fast path ran
                }
            }
            // Inf or NaN anywhere in x: the exact path's result, bit for bit.
            for (float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
                std::vector<float> x = random_values(size_t(cols), 15);
                x[size_t(cols / 2)] = bad;
                const std::vector<float> f = product(fast, x), e = product(exact, x);
                INFO(cpu_isa_name(isa) << " x holds " << bad);
                CHECK(std::memcmp(f.data(), e.data(), f.size() * sizeof(float)) == 0);
            }
        }
    }
}

TEST_CASE("cpu matmul reads Hugging Face permuted q/k rows in Meta order", "[cpu]") {
    const int64_t heads = 3, head_dim = 8, rows = heads * head_dim, cols = 19;
    for (int64_t T : {1, 4}) {
        OpModel om;
        const auto held = om.add("wq", DType::BF16, {rows, cols}, random_values(size_t(rows * cols), 21), heads);
        const auto x = random_values(size_t(T * cols), 22);
        Run run(om.model);
        Buf xb = run.upload(x);
        Buf out = run.b->alloc(T * rows, "out");
        run.b->begin();
        run.b->matmul(out, xb, om.tensor("wq"), T);
        run.b->submit();
        const auto got = run.read(out, T * rows);
        // Meta row 2i+p of head h is stored at row h*head_dim + p*head_dim/2 + i (the HF converter's permute).
        std::vector<double> want(size_t(T * rows));
        for (int64_t t = 0; t < T; ++t)
            for (int64_t h = 0; h < heads; ++h)
                for (int64_t i = 0; i < head_dim / 2; ++i)
                    for (int64_t p = 0; p < 2; ++p) {
                        const int64_t meta = h * head_dim + 2 * i + p;
                        const int64_t stored = h * head_dim + p * head_dim / 2 + i;
                        double s = 0;
                        for (int64_t k = 0; k < cols; ++k) s += held[size_t(stored * cols + k)] * x[size_t(t * cols + k)];
                        want[size_t(t * rows + meta)] = s;
                    }
        CHECK(rel_err(got, want) < 1e-6);
    }
}

TEST_CASE("cpu matmul gives the same result on one thread and on many", "[cpu]") {
    OpModel om;
    om.add("w", DType::BF16, {101, 47}, random_values(101 * 47, 31));
    const auto x = random_values(7 * 47, 32);
    std::vector<std::vector<float>> results;
    for (int threads : {1, 3}) {
        Run run(om.model, threads);
        results.push_back(run.matmul(om.tensor("w"), x, 7));
    }
    CHECK(results[0] == results[1]);
}

TEST_CASE("cpu rmsnorm matches a double reference", "[cpu]") {
    for (DType dtype : {DType::F32, DType::BF16}) {
        const int64_t n = 45, T = 3;
        OpModel om;
        const auto g = om.add("g", dtype, {n}, random_values(size_t(n), 41));
        const auto x = random_values(size_t(T * n), 42, 3.0f);
        Run run(om.model);
        Buf xb = run.upload(x);
        Buf out = run.b->alloc(T * n, "out");
        run.b->begin();
        run.b->rmsnorm(out, xb, om.tensor("g"), T, 1e-5f);
        run.b->submit();
        std::vector<double> want(size_t(T * n));
        for (int64_t t = 0; t < T; ++t) {
            double ss = 0;
            for (int64_t i = 0; i < n; ++i) ss += double(x[size_t(t * n + i)]) * x[size_t(t * n + i)];
            const double inv = 1.0 / std::sqrt(ss / n + 1e-5);
            for (int64_t i = 0; i < n; ++i) want[size_t(t * n + i)] = x[size_t(t * n + i)] * inv * g[size_t(i)];
        }
        CHECK(rel_err(run.read(out, T * n), want) < 1e-6);
    }
}

TEST_CASE("rope_frequencies follow precompute_freqs_cis and Llama 3.1 apply_scaling", "[cpu]") {
    ModelConfig c;
    c.head_dim = 128;
    c.rope_theta = 500000.0f;
    auto plain = rope_frequencies(c);
    REQUIRE(plain.size() == 64);
    for (size_t i = 0; i < plain.size(); ++i)
        CHECK(plain[i] == Approx(std::pow(500000.0, -double(2 * i) / 128.0)).epsilon(1e-12));

    c.rope_scaling.enabled = true;  // factor 8, low 1, high 4, original context 8192
    auto scaled = rope_frequencies(c);
    int kept = 0, divided = 0, blended = 0;
    for (size_t i = 0; i < plain.size(); ++i) {
        const double wavelen = 2 * std::numbers::pi / plain[i];
        if (wavelen < 8192.0 / 4) {
            CHECK(scaled[i] == plain[i]);
            ++kept;
        } else if (wavelen > 8192.0) {
            CHECK(scaled[i] == Approx(plain[i] / 8).epsilon(1e-12));
            ++divided;
        } else {
            const double smooth = (8192.0 / wavelen - 1) / 3;
            CHECK(scaled[i] == Approx((1 - smooth) * plain[i] / 8 + smooth * plain[i]).epsilon(1e-12));
            CHECK(scaled[i] < plain[i]);
            CHECK(scaled[i] > plain[i] / 8);
            ++blended;
        }
    }
    // Llama 3.1's 128-wide heads have all three bands.
    CHECK(kept > 0);
    CHECK(divided > 0);
    CHECK(blended > 0);

    std::vector<float> factors(64, 2.0f);
    factors[5] = 4.0f;
    auto gguf = rope_frequencies(c, factors);
    CHECK(gguf[0] == Approx(plain[0] / 2).epsilon(1e-12));
    CHECK(gguf[5] == Approx(plain[5] / 4).epsilon(1e-12));
    CHECK_THROWS_AS(rope_frequencies(c, std::vector<float>(3, 1.0f)), ModelError);
}

TEST_CASE("cpu rope rotates interleaved pairs, accurately at long positions", "[cpu]") {
    OpModel om(/*head_dim*/ 16, /*n_heads*/ 3, /*n_kv_heads*/ 1);
    om.model.config.rope_theta = 500000.0f;
    om.model.config.rope_scaling.enabled = true;
    const auto freqs = rope_frequencies(om.model.config);
    for (int64_t pos0 : {0, 7, 5000, 100000}) {
        const int64_t T = 3, heads = 3, hd = 16;
        const auto x = random_values(size_t(T * heads * hd), 51);
        Run run(om.model);
        Buf xb = run.upload(x);
        run.b->begin();
        run.b->rope(xb, T, heads, pos0);
        run.b->submit();
        std::vector<double> want(x.size());
        for (int64_t t = 0; t < T; ++t)
            for (int64_t h = 0; h < heads; ++h)
                for (int64_t i = 0; i < hd / 2; ++i) {
                    const size_t k = size_t((t * heads + h) * hd + 2 * i);
                    const double a = double(pos0 + t) * freqs[size_t(i)];
                    // (x0 + i x1) * e^{i a}
                    want[k] = x[k] * std::cos(a) - x[k + 1] * std::sin(a);
                    want[k + 1] = x[k] * std::sin(a) + x[k + 1] * std::cos(a);
                }
        INFO("pos0 " << pos0);
        CHECK(rel_err(run.read(xb, T * heads * hd), want) < 1e-6);
    }
}

// Causal grouped-query attention in double: out [T, n_heads * hd] and probabilities [n_heads, T, pos0 + T] of
// queries q at positions pos0.. over caches kc, vc ([>= pos0 + T, n_kv * hd]).
struct Attended {
    std::vector<double> out, probs;
};
Attended reference_attention(const std::vector<float>& q, const std::vector<float>& kc, const std::vector<float>& vc,
                             int64_t hd, int64_t n_heads, int64_t n_kv, int64_t T, int64_t pos0) {
    const int64_t L = pos0 + T, q_dim = n_heads * hd, kv_dim = n_kv * hd, n_rep = n_heads / n_kv;
    Attended a{std::vector<double>(size_t(T * q_dim)), std::vector<double>(size_t(n_heads * T * L), 0.0)};
    for (int64_t h = 0; h < n_heads; ++h)
        for (int64_t t = 0; t < T; ++t) {
            const int64_t g = h / n_rep;
            std::vector<double> s(size_t(pos0 + t + 1));
            double mx = -1e300, sum = 0;
            for (int64_t j = 0; j <= pos0 + t; ++j) {
                double d = 0;
                for (int64_t i = 0; i < hd; ++i)
                    d += double(q[size_t(t * q_dim + h * hd + i)]) * kc[size_t(j * kv_dim + g * hd + i)];
                s[size_t(j)] = d / std::sqrt(double(hd));
                mx = std::max(mx, s[size_t(j)]);
            }
            for (auto& v : s) sum += (v = std::exp(v - mx));
            for (int64_t j = 0; j <= pos0 + t; ++j) {
                const double p = s[size_t(j)] / sum;
                a.probs[size_t((h * T + t) * L + j)] = p;
                for (int64_t i = 0; i < hd; ++i)
                    a.out[size_t(t * q_dim + h * hd + i)] += p * vc[size_t(j * kv_dim + g * hd + i)];
            }
        }
    return a;
}

TEST_CASE("cpu attention matches causal grouped-query softmax attention, with probabilities", "[cpu]") {
    const int64_t hd = 6, n_heads = 4, n_kv = 2;
    OpModel om(hd, n_heads, n_kv);
    for (auto [T, pos0] : {std::pair<int64_t, int64_t>{1, 0}, {1, 9}, {5, 0}, {3, 4}}) {
        const int64_t L = pos0 + T, q_dim = n_heads * hd, kv_dim = n_kv * hd, max_seq = L + 2;
        const auto q = random_values(size_t(T * q_dim), 61);
        auto kc = random_values(size_t(max_seq * kv_dim), 62);
        auto vc = random_values(size_t(max_seq * kv_dim), 63);
        Run run(om.model);
        Buf qb = run.upload(q), kb = run.upload(kc), vb = run.upload(vc);
        Buf out = run.b->alloc(T * q_dim, "out");
        Buf probs = run.b->alloc(n_heads * T * L, "probs");
        run.b->write(probs, std::vector<float>(size_t(n_heads * T * L), 7.0f));  // must be overwritten
        run.b->begin();
        run.b->attention(out, qb, kb, vb, T, pos0, probs);
        run.b->submit();
        const Attended want = reference_attention(q, kc, vc, hd, n_heads, n_kv, T, pos0);
        INFO("T " << T << " pos0 " << pos0);
        CHECK(rel_err(run.read(out, T * q_dim), want.out) < 1e-6);
        CHECK(rel_err(run.read(probs, n_heads * T * L), want.probs) < 1e-6);
    }
}

TEST_CASE("cpu attention over long caches and wide heads: float32 and binary16 caches, any thread count", "[cpu]") {
    // Head sizes through every part of the kernel (64-column runs, 8-column runs, single columns), caches longer
    // than a block of keys (64 rows of 64), and one to four query heads per kv head.
    struct Shape {
        int64_t hd, n_heads, n_kv;
    };
    for (Shape sh : {Shape{64, 8, 2}, Shape{72, 3, 1}, Shape{12, 4, 4}, Shape{128, 4, 1}}) {
        OpModel om(sh.hd, sh.n_heads, sh.n_kv);
        for (auto [T, pos0] : {std::pair<int64_t, int64_t>{1, 0}, {1, 200}, {3, 130}}) {
            const int64_t L = pos0 + T, q_dim = sh.n_heads * sh.hd, kv_dim = sh.n_kv * sh.hd;
            const auto q = random_values(size_t(T * q_dim), 64, 3.0f);  // peaked and flat softmaxes both
            const auto kc = random_values(size_t(L * kv_dim), 65), vc = random_values(size_t(L * kv_dim), 66);
            // The binary16 cache holds the values rounded; the reference for it reads the same rounded values.
            std::vector<float> kh(kc.size()), vh(vc.size());
            for (size_t i = 0; i < kc.size(); ++i) kh[i] = f16_to_f32(f32_to_f16(kc[i]));
            for (size_t i = 0; i < vc.size(); ++i) vh[i] = f16_to_f32(f32_to_f16(vc[i]));
            const Attended want = reference_attention(q, kc, vc, sh.hd, sh.n_heads, sh.n_kv, T, pos0);
            const Attended want_h = reference_attention(q, kh, vh, sh.hd, sh.n_heads, sh.n_kv, T, pos0);
            std::vector<float> first_out, first_probs;
            for (int threads : {1, 3, 16}) {
                INFO("head_dim " << sh.hd << " heads " << sh.n_heads << "/" << sh.n_kv << " T " << T << " pos0 "
                                 << pos0 << " threads " << threads);
                Run run(om.model, threads);
                Buf qb = run.upload(q), kb = run.upload(kc), vb = run.upload(vc);
                Buf kr = run.upload(kh), vr = run.upload(vh);  // float32 caches of the rounded values
                Buf k16 = run.b->alloc(L * kv_dim / 2, "k16"), v16 = run.b->alloc(L * kv_dim / 2, "v16");
                Buf out = run.b->alloc(T * q_dim, "out"), out_h = run.b->alloc(T * q_dim, "out_h");
                Buf out_r = run.b->alloc(T * q_dim, "out_r");
                Buf probs = run.b->alloc(sh.n_heads * T * L, "probs");
                run.b->begin();
                run.b->store_f16(k16, kb, L * kv_dim);
                run.b->store_f16(v16, vb, L * kv_dim);
                run.b->attention(out, qb, kb, vb, T, pos0, probs);
                run.b->attention_f16(out_h, qb, k16, v16, T, pos0, Buf{});
                run.b->attention(out_r, qb, kr, vr, T, pos0, Buf{});
                run.b->submit();
                const auto got = run.read(out, T * q_dim), got_p = run.read(probs, sh.n_heads * T * L);
                const auto got_h = run.read(out_h, T * q_dim);
                CHECK(rel_err(got, want.out) < 1e-6);
                CHECK(rel_err(got_p, want.probs) < 1e-6);
                CHECK(rel_err(got_h, want_h.out) < 1e-6);
                CHECK(got_h == run.read(out_r, T * q_dim));  // widened exactly: the float32 cache's bits
                // Split differently over threads, each head's sums are the same.
                if (threads == 1) first_out = got, first_probs = got_p;
                CHECK(got == first_out);
                CHECK(got_p == first_probs);
            }
        }
    }
}

TEST_CASE("cpu attention of a prompt gives each token the bits that decoding it one at a time gives", "[cpu]") {
    // A prompt's queries go through attention in tiles of tokens; a decode step is one query. Each token's output
    // and probabilities must not depend on that: the same scores, softmax and sums, in the same order.
    struct Shape {
        int64_t hd, n_heads, n_kv;
    };
    for (Shape sh : {Shape{64, 8, 2}, Shape{72, 3, 1}, Shape{12, 4, 4}, Shape{128, 4, 1}, Shape{8, 6, 2}}) {
        OpModel om(sh.hd, sh.n_heads, sh.n_kv);
        for (auto [T, pos0] : {std::pair<int64_t, int64_t>{13, 0}, {6, 70}, {9, 129}}) {
            const int64_t L = pos0 + T, q_dim = sh.n_heads * sh.hd, kv_dim = sh.n_kv * sh.hd;
            const auto q = random_values(size_t(T * q_dim), 67, 3.0f);
            const auto kc = random_values(size_t(L * kv_dim), 68), vc = random_values(size_t(L * kv_dim), 69);
            std::vector<float> first[2];  // each cache's result on the first instruction set
            for (auto [threads, isa] : {std::pair<int, std::string>{1, ""}, {3, ""}, {2, "avx2"}}) {
                if (!isa.empty() && !cpu_isa_supported(cpu_isa_from_name(isa))) continue;
                for (bool f16 : {false, true}) {
                    INFO("head_dim " << sh.hd << " heads " << sh.n_heads << "/" << sh.n_kv << " T " << T << " pos0 "
                                     << pos0 << " threads " << threads << " binary16 cache " << f16 << " isa "
                                     << (isa.empty() ? "best" : isa));
                    Run run(om.model, threads, isa);
                    Buf kb = run.upload(kc), vb = run.upload(vc);
                    Buf k16 = run.b->alloc(L * kv_dim / 2, "k16"), v16 = run.b->alloc(L * kv_dim / 2, "v16");
                    auto attend = [&](Buf o, Buf qb, int64_t n, int64_t at, Buf p) {
                        if (f16) run.b->attention_f16(o, qb, k16, v16, n, at, p);
                        else run.b->attention(o, qb, kb, vb, n, at, p);
                    };
                    Buf qb = run.upload(q), out = run.b->alloc(T * q_dim, "out");
                    Buf probs = run.b->alloc(sh.n_heads * T * L, "probs");
                    run.b->begin();
                    run.b->store_f16(k16, kb, L * kv_dim);
                    run.b->store_f16(v16, vb, L * kv_dim);
                    attend(out, qb, T, pos0, probs);
                    run.b->submit();
                    const auto all = run.read(out, T * q_dim), all_p = run.read(probs, sh.n_heads * T * L);
                    // The 16-wide kernels (avx512-vnni, heads of 64 and 128) and the 8-wide ones take the same
                    // sums; where the compiler fuses the 8-wide ones' multiply-adds (-O2 and up) to the bit, at -O1
                    // (the sanitizer builds) within rounding.
                    if (first[f16].empty()) first[f16] = all;
                    CHECK(rel_err(all, std::vector<double>(first[f16].begin(), first[f16].end())) < 1e-6);
                    for (int64_t t = 0; t < T; ++t) {
                        const int64_t n = pos0 + t + 1;
                        Buf qt = run.upload(std::vector<float>(q.begin() + t * q_dim, q.begin() + (t + 1) * q_dim));
                        Buf ot = run.b->alloc(q_dim, "out_t"), pt = run.b->alloc(sh.n_heads * n, "probs_t");
                        run.b->begin();
                        attend(ot, qt, 1, pos0 + t, pt);
                        run.b->submit();
                        const auto one = run.read(ot, q_dim), one_p = run.read(pt, sh.n_heads * n);
                        INFO("token " << t);
                        CHECK(one == std::vector<float>(all.begin() + t * q_dim, all.begin() + (t + 1) * q_dim));
                        for (int64_t h = 0; h < sh.n_heads; ++h) {
                            const float* row = all_p.data() + (h * T + t) * L;
                            CHECK(std::vector<float>(one_p.begin() + h * n, one_p.begin() + (h + 1) * n) ==
                                  std::vector<float>(row, row + n));
                            CHECK(std::all_of(row + n, row + L, [](float x) { return x == 0.0f; }));
                        }
                    }
                }
            }
        }
    }
}

TEST_CASE("cpu embed, swiglu, add, copy", "[cpu]") {
    OpModel om;
    const int64_t dim = om.model.config.dim, vocab = 50;
    for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
        OpModel m2;
        const auto table = m2.add("tok_embeddings", dtype, {vocab, dim}, random_values(size_t(vocab * dim), 71));
        Run run(m2.model);
        const std::vector<int32_t> tokens{3, 49, 0, 3};
        Buf out = run.b->alloc(4 * dim, "x0");
        run.b->begin();
        run.b->embed(out, tokens);
        run.b->submit();
        std::vector<double> want;
        for (int32_t id : tokens)
            want.insert(want.end(), table.begin() + id * dim, table.begin() + (id + 1) * dim);
        CHECK(rel_err(run.read(out, 4 * dim), want) == 0.0);
        const std::vector<int32_t> bad{1, 50};
        run.b->begin();
        CHECK_THROWS_AS(run.b->embed(out, bad), InputError);
    }

    const int64_t n = 1001;
    const auto a = random_values(size_t(n), 72, 3.0f), b = random_values(size_t(n), 73);
    Run run(om.model);
    Buf ab = run.upload(a), bb = run.upload(b), out = run.b->alloc(n, "out");
    run.b->begin();
    run.b->swiglu(out, ab, bb, n);
    run.b->submit();
    std::vector<double> want(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) want[size_t(i)] = a[size_t(i)] / (1 + std::exp(-double(a[size_t(i)]))) * b[size_t(i)];
    CHECK(rel_err(run.read(out, n), want) < 1e-6);

    run.b->begin();
    run.b->add(ab, ab, bb, n);  // in place, as the residual stream does
    run.b->submit();
    for (int64_t i = 0; i < n; ++i) want[size_t(i)] = double(a[size_t(i)]) + b[size_t(i)];
    CHECK(rel_err(run.read(ab, n), want) < 1e-7);

    run.b->begin();
    run.b->copy(out.at(1, n - 1), bb, n - 1);
    run.b->submit();
    const auto copied = run.read(out, n);
    CHECK(std::equal(b.begin(), b.end() - 1, copied.begin() + 1));
}

TEST_CASE("cpu fused q/k/v and w1/w3 products equal the separate ops, bit for bit", "[cpu]") {
    // CpuBackend fuses matmul_qkv and matmul_swiglu (x prepared once, one job of the pool) where the matrices take
    // the same path; elsewhere Backend's defaults run. Either way the values must be those of matmul, rope and
    // swiglu called one by one. Shapes: head_dim 64 (rows in whole units of the pool's grain, 256 columns for
    // the K types) and head_dim 8 with 3 heads (24 rows: the unfused default).
    struct Case {
        DType wq, wv;  // wk and w1 as wq, w3 as wv
        int64_t head_dim, n_heads;
    };
    const Case cases[] = {{DType::F32, DType::F32, 64, 4},   {DType::F16, DType::F16, 64, 4},
                          {DType::BF16, DType::BF16, 64, 4}, {DType::Q8_0, DType::Q8_0, 64, 4},
                          {DType::Q4_K, DType::Q6_K, 64, 4}, {DType::Q4_0, DType::Q5_K, 64, 4},
                          {DType::F16, DType::Q8_0, 64, 4},  {DType::BF16, DType::BF16, 8, 3}};
    for (const Case& k : cases)
        for (bool exact : {true, false})
            for (int threads : {1, 3})
                for (int64_t T : {1, 5}) {
                    OpModel om(k.head_dim, k.n_heads, 1);
                    const ModelConfig& c = om.model.config;
                    const int64_t dim = c.dim, kv = c.n_kv_heads * c.head_dim, hidden = c.hidden_dim;
                    auto add = [&](const std::string& name, DType t, int64_t rows, uint32_t seed) {
                        const auto v = random_values(size_t(rows * dim), seed, 0.1f);
                        if (dtype_is_block(t)) om.add_blocks(name, t, {rows, dim}, v);
                        else om.add(name, t, {rows, dim}, v);
                    };
                    add("wq", k.wq, dim, 81);
                    add("wk", k.wq, kv, 82);
                    add("wv", k.wv, kv, 83);
                    add("w1", k.wq, hidden, 84);
                    add("w3", k.wv, hidden, 85);
                    INFO(dtype_name(k.wq) << " / " << dtype_name(k.wv) << " head_dim " << k.head_dim
                                          << (exact ? " exact" : " fast") << " threads " << threads << " T " << T);
                    Run run(om.model, threads, "", exact);
                    Backend& b = *run.b;
                    Buf x = run.upload(random_values(size_t(T * dim), 86));
                    auto fresh = [&](int64_t n) { return b.alloc(n, "out"); };
                    Buf q = fresh(T * dim), kk = fresh(T * kv), v = fresh(T * kv), h = fresh(T * hidden);
                    Buf q1 = fresh(T * dim), k1 = fresh(T * kv), v1 = fresh(T * kv), h1 = fresh(T * hidden);
                    Buf a = fresh(T * hidden), g = fresh(T * hidden), a1 = fresh(T * hidden), g1 = fresh(T * hidden);
                    const int64_t pos0 = 3;
                    b.begin();
                    b.matmul_qkv(q, kk, v, x, om.tensor("wq"), om.tensor("wk"), om.tensor("wv"), T, c.n_heads,
                                 c.n_kv_heads, pos0);
                    b.matmul_swiglu(h, x, om.tensor("w1"), om.tensor("w3"), T, a, g);
                    b.matmul(q1, x, om.tensor("wq"), T);
                    b.rope(q1, T, c.n_heads, pos0);
                    b.matmul(k1, x, om.tensor("wk"), T);
                    b.rope(k1, T, c.n_kv_heads, pos0);
                    b.matmul(v1, x, om.tensor("wv"), T);
                    b.matmul(a1, x, om.tensor("w1"), T);
                    b.matmul(g1, x, om.tensor("w3"), T);
                    b.swiglu(h1, a1, g1, T * hidden);
                    b.submit();
                    const std::pair<Buf, Buf> pairs[] = {{q, q1}, {kk, k1}, {v, v1}, {h, h1}};
                    for (auto [fused, separate] : pairs) {
                        const std::vector<float> f = run.read(fused, fused.count);
                        const std::vector<float> s = run.read(separate, separate.count);
                        CHECK(std::memcmp(f.data(), s.data(), f.size() * sizeof(float)) == 0);
                        CHECK(std::any_of(f.begin(), f.end(), [](float e) { return e != 0; }));
                    }
                }
}

TEST_CASE("cpu topk is descending with lower ids first on ties", "[cpu]") {
    OpModel om;
    Run run(om.model);
    std::vector<float> row{0.5f, 2.0f, -1.0f, 2.0f, 7.0f, 2.0f, std::nanf(""), 0.5f, 7.0f};
    Buf b = run.upload(row);
    run.b->begin();
    Readback r = run.b->topk(b, 9, 6);
    Readback all = run.b->topk(b, 9, 20);
    run.b->submit();
    const auto top = run.b->topk_result(r);
    const std::vector<int32_t> want_ids{4, 8, 1, 3, 5, 0};
    REQUIRE(top.size() == want_ids.size());
    for (size_t i = 0; i < top.size(); ++i) {
        CHECK(top[i].id == want_ids[i]);
        CHECK(top[i].logit == row[size_t(top[i].id)]);
    }
    CHECK(run.b->topk_result(all).size() == 9);
}

TEST_CASE("cpu backend rejects out-of-range buffers and unsupported weight types", "[cpu]") {
    OpModel om;
    Run run(om.model);
    Buf small = run.b->alloc(4, "small");
    run.b->begin();
    CHECK_THROWS_AS(run.b->add(small, small, small, 5), Error);
    CHECK_THROWS_AS(run.b->copy(small.at(2, 2), small, 3), Error);

    OpModel q;
    q.add("w", DType::F32, {2, 32}, random_values(64, 81));
    q.model.tensors["w"].dtype = static_cast<DType>(200);  // every real DType is read now; a corrupt one is not
    BackendOptions o;
    auto b = make_backend(o);
    CHECK_THROWS_AS(b->load(q.model), UnsupportedError);
    // A block type whose bytes do not hold its blocks (a view that lies about its size) is a FormatError.
    OpModel s;
    s.add("w", DType::F32, {2, 32}, random_values(64, 81));
    s.model.tensors["w"].dtype = DType::Q8_0;
    s.model.tensors["w"].nbytes = 60;  // 2 blocks need 68
    CHECK_THROWS_AS(b->load(s.model), FormatError);

    BackendOptions v;
    v.name = "tpu";
    CHECK_THROWS_AS(make_backend(v), UnsupportedError);
}

// The thread pool under the backend: many small ops in a row (each handed out in chunks to every thread), and an
// exception thrown on a worker reaching the caller with the pool still usable after it.
TEST_CASE("cpu ops on a pool of 4 threads: thousands of small ops agree, an error in a worker is rethrown", "[cpu]") {
    OpModel om;
    om.add("w", DType::BF16, {640, 64}, random_values(640 * 64, 41));
    TensorView bad = om.tensor("w");
    bad.dtype = static_cast<DType>(200);  // the kernels throw UnsupportedError for it, on whichever thread runs a row
    const auto x = random_values(64, 42);
    Run run(om.model, 4);
    Buf xb = run.upload(x);
    Buf out = run.b->alloc(640, "out");
    run.b->begin();
    run.b->matmul(out, xb, om.tensor("w"), 1);
    const std::vector<float> want = run.read(out, 640);
    int mismatches = 0;
    for (int i = 0; i < 2000; ++i) {
        run.b->begin();
        if (i % 100 == 7) {
            CHECK_THROWS_AS(run.b->matmul(out, xb, bad, 1), UnsupportedError);
            continue;
        }
        run.b->matmul(out, xb, om.tensor("w"), 1);
        mismatches += run.read(out, 640) != want;
    }
    CHECK(mismatches == 0);
}
