// The fused kernels of the decode path (matvec.comp's epilogues): w1 and w3 with SwiGLU in one dispatch
// (matmul_swiglu), RoPE on the q/k products (matmul_rope), attention's three products in one dispatch
// (matmul_qkv), and wo's or w2's residual add with the RMSNorm after it (matmul_add_rmsnorm). Each is checked
// three ways: on the device against its unfused ops (matmul, matmul, swiglu / matmul, rope / matmul_rope,
// matmul_rope, matmul / matmul_add, rmsnorm) bit for bit, since the sums, the gate, the rotation and the norm
// are the same float32 operations in the same order; against the CPU backend (which runs the interface's defaults) within the matmul
// tests' bound; and whole passes of the golden model with the fusions on and off (STRATA_VK_FUSE=0), equal to
// the bit and with fewer dispatches and barriers per decode step. Every weight type the matvec reads,
// in the device's workgroup shape and in a GPU's. Lavapipe compiles each new pipeline for a while: the shapes are
// tiny and the cases chosen to reach each variant once.
#include <array>
#include <bit>
#include <cmath>
#include <map>

#include "strata/quant.hpp"
#include "strata/transformer.hpp"
#include "vk_helpers.hpp"

using namespace strata;
using namespace strata::test;

namespace {

const DType kAllTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0,
                           DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};

// A [rows, cols] weight of small random values stored as t (block types quantized by the CPU's quantizer).
std::unique_ptr<OwnedTensor> weight(const std::string& name, DType t, int64_t rows, int64_t cols, uint64_t seed) {
    const std::vector<float> v = random_floats(rows * cols, seed, 0.1f);
    if (!dtype_is_block(t)) return make_tensor(name, t, {rows, cols}, v);
    auto o = std::make_unique<OwnedTensor>();
    o->bytes.resize(static_cast<size_t>(rows * cols / dtype_block_size(t) * dtype_block_bytes(t)));
    quant::quantize(t, v.data(), o->bytes.data(), rows * cols);
    o->view.name = name;
    o->view.source_name = name;
    o->view.dtype = t;
    o->view.shape = {rows, cols};
    o->view.data = o->bytes.data();
    o->view.nbytes = o->bytes.size();
    o->view.file = "(test)";
    return o;
}

class Backends {
public:
    Backend& get(bool vulkan, uint64_t range = 0) {
        auto& b = backends_[{vulkan, range}];
        if (!b) b = vulkan ? make_vulkan(range) : make_cpu();
        return *b;
    }

private:
    std::map<std::pair<bool, uint64_t>, std::unique_ptr<Backend>> backends_;
};

// Runs body(backends, gpu_shape) in the device's matvec shape (lavapipe: one 8-lane subgroup, 4 rows), then in a
// GPU's (128 invocations whose subgroups are reduced through shared memory, 2 rows, block types' pieces on
// neighbouring lanes, float types' loads 3 iterations at a time), each with backends of its own.
template <class Body>
void in_both_shapes(Body&& body) {
    for (const char* shape : {"", "128,2"}) {
        INFO("STRATA_VK_MATVEC=" << shape);
        ScopedEnv env("STRATA_VK_MATVEC", shape);
        const bool gpu_shape = !std::string(shape).empty();
        ScopedEnv quads("STRATA_VK_QUAD_LANES", gpu_shape ? "1" : "");  // a GPU's way through block types
        ScopedEnv loads("STRATA_VK_MATVEC_LOADS", gpu_shape ? "3" : "");
        Backends backends;
        body(backends, gpu_shape);
    }
}

// Runs `op` (given x and the output) on b after loading m; x is T * K values at x_offset of its buffer.
template <class Op>
std::vector<float> run(Backend& b, const Model& m, const Filler& f, int32_t ix, int64_t T, int64_t K, int64_t n_out,
                       int64_t x_offset, Op&& op) {
    b.load(m);
    Buf x = b.alloc(x_offset + T * K, "x");
    b.begin();
    f.fill(b, x.at(x_offset, T * K), ix, T * K);
    Guarded out = Guarded::make(b, f, n_out, "out");
    op(x.at(x_offset, T * K), out.inner());
    Readback r = b.readback(out.whole, n_out + 2 * Guarded::kPad);
    b.submit();
    std::vector<float> got = unguard(b.fetch(r), n_out);
    b.free(x);
    b.free(out.whole);
    return got;
}

double tolerance(int64_t K) { return 2e-6 * std::sqrt(double(K)) + 1e-6; }

// The three runs of a check, record(backend, fused): the CPU backend (the interface's defaults), the device
// fused and the device unfused. The device within the matmul bound of the CPU; fused and unfused the same bits.
template <class Record>
void compare_runs(Backends& backends, uint64_t range, int64_t K, Record&& record) {
    Backend& gpu = backends.get(true, range);
    const std::vector<float> want = record(backends.get(false), true);
    const std::vector<float> got = record(gpu, true);
    const std::vector<float> split = record(gpu, false);
    require_close(got, want, tolerance(K));
    CHECK(got == split);
}

void check_swiglu(Backends& backends, DType t, int64_t N, int64_t K, int64_t T, int64_t x_offset = 0,
                  uint64_t range = 0) {
    INFO(dtype_name(t) << " w1, w3 [" << N << ", " << K << "], T = " << T << ", x offset " << x_offset
                       << ", binding range " << range);
    Filler f;
    const int32_t ix = f.add(random_floats(T * K, 71));
    const Model& m = f.model();
    auto w1 = weight("w1", t, N, K, 72), w3 = weight("w3", t, N, K, 73);
    auto record = [&](Backend& b, bool fused) {
        return run(b, m, f, ix, T, K, T * N, x_offset, [&](Buf x, Buf out) {
            Buf a = b.alloc(T * N, "a"), g = b.alloc(T * N, "g");
            if (fused) {
                b.matmul_swiglu(out, x, w1->view, w3->view, T, a, g);
            } else {
                b.matmul(a, x, w1->view, T);
                b.matmul(g, x, w3->view, T);
                b.swiglu(out, a, g, T * N);
            }
            b.free(a);
            b.free(g);
        });
    };
    compare_runs(backends, range, K, record);
}

void check_rope(Backends& backends, DType t, int64_t n_heads, int64_t head_dim, int64_t K, int64_t T, int64_t pos0,
                bool scaled = false, uint64_t range = 0) {
    const int64_t N = n_heads * head_dim;
    INFO(dtype_name(t) << " w [" << N << ", " << K << "] (" << n_heads << " heads of " << head_dim << "), T = " << T
                       << ", pos0 " << pos0 << ", binding range " << range);
    Filler f;
    const int32_t ix = f.add(random_floats(T * K, 81));
    const Model& m = f.model(n_heads, 1, head_dim, 64, scaled);
    auto w = weight("wq", t, N, K, 82);
    auto record = [&](Backend& b, bool fused) {
        return run(b, m, f, ix, T, K, T * N, 0, [&](Buf x, Buf out) {
            if (fused) {
                b.matmul_rope(out, x, w->view, T, n_heads, pos0);
            } else {
                b.matmul(out, x, w->view, T);
                b.rope(out, T, n_heads, pos0);
            }
        });
    };
    compare_runs(backends, range, K, record);
}

// Attention's three projections in one op (matmul_qkv) against matmul_rope, matmul_rope and matmul: q's rows, a
// gap that must keep its sentinels, k's rows, another gap, v's rows, all in one guarded output. `dispatches`: how
// many the device should save against the three ops (2: one pass; 1: wq and wk together, wv alone; 0: none).
void check_qkv(Backends& backends, DType tq, DType tk, DType tv, int64_t n_heads, int64_t n_kv_heads,
               int64_t head_dim, int64_t K, int64_t T, int64_t pos0, int64_t saved, int64_t x_offset = 0,
               uint64_t range = 0) {
    const int64_t Nq = n_heads * head_dim, Nk = n_kv_heads * head_dim, gap = 11;
    INFO(dtype_name(tq) << " wq [" << Nq << ", " << K << "], " << dtype_name(tk) << " wk and " << dtype_name(tv)
                        << " wv [" << Nk << ", " << K << "], head_dim " << head_dim << ", T = " << T << ", pos0 "
                        << pos0 << ", x offset " << x_offset << ", binding range " << range);
    Filler f;
    const int32_t ix = f.add(random_floats(T * K, 85));
    const Model& m = f.model(n_heads, n_kv_heads, head_dim, 64);
    auto wq = weight("wq", tq, Nq, K, 86), wk = weight("wk", tk, Nk, K, 87), wv = weight("wv", tv, Nk, K, 88);
    const int64_t k0 = T * Nq + gap, v0 = k0 + T * Nk + gap;
    int64_t dispatches = 0;
    auto record = [&](Backend& b, bool one_op) {
        std::vector<float> got = run(b, m, f, ix, T, K, v0 + T * Nk, x_offset, [&](Buf x, Buf out) {
            const Buf q = out.at(0, T * Nq), k = out.at(k0, T * Nk), v = out.at(v0, T * Nk);
            if (one_op) {
                b.matmul_qkv(q, k, v, x, wq->view, wk->view, wv->view, T, n_heads, n_kv_heads, pos0);
            } else {
                b.matmul_rope(q, x, wq->view, T, n_heads, pos0);
                b.matmul_rope(k, x, wk->view, T, n_kv_heads, pos0);
                b.matmul(v, x, wv->view, T);
            }
        });
        if (b.info().backend == "vulkan") dispatches += (one_op ? -1 : 1) * vulkan_last_step_stats(b).dispatches;
        for (int64_t i = 0; i < gap; ++i) {
            REQUIRE(got[static_cast<size_t>(T * Nq + i)] == kSentinel);
            REQUIRE(got[static_cast<size_t>(k0 + T * Nk + i)] == kSentinel);
        }
        return got;
    };
    compare_runs(backends, range, K, record);
    CHECK(dispatches == saved);
}

// wo's (or w2's) product added into the residual stream and the RMSNorm of the sum, as one op
// (matmul_add_rmsnorm) against matmul_add then rmsnorm, twice in one step (the fused tail's counter must be
// back at 0 for the second): the new residual rows and the normed rows (guarded). `saved`: dispatches the device
// saves against the two ops (1 each time: one pass; 0: the fall-back).
void check_add_norm(Backends& backends, DType t, DType gain, int64_t N, int64_t K, int64_t T, int64_t saved,
                    uint64_t range = 0) {
    INFO(dtype_name(t) << " w [" << N << ", " << K << "], " << dtype_name(gain) << " gain, T = " << T
                       << ", binding range " << range);
    Filler f;
    const int32_t ix = f.add(random_floats(2 * T * K, 95));
    const int32_t ih = f.add(random_floats(T * N, 96, 2.0f));
    const Model& m = f.model();
    auto w = weight("wo", t, N, K, 97);
    std::vector<float> gv = random_floats(N, 98, 0.5f);
    for (float& v : gv) v += 1.0f;
    auto g = make_tensor("ffn_norm", gain, {N}, gv);
    int64_t dispatches = 0;
    auto record = [&](Backend& b, bool one_op) {
        b.load(m);
        Buf x = b.alloc(2 * T * K, "x"), h = b.alloc(T * N, "h"), scratch = b.alloc(T * N, "scratch");
        b.begin();
        f.fill(b, x, ix, 2 * T * K);
        f.fill(b, h, ih, T * N);
        Guarded n1 = Guarded::make(b, f, T * N, "normed"), n2 = Guarded::make(b, f, T * N, "normed again");
        for (int i = 0; i < 2; ++i) {
            const Buf xi = x.at(i * T * K, T * K), ni = (i == 0 ? n1 : n2).inner();
            if (one_op) {
                b.matmul_add_rmsnorm(h, xi, w->view, T, scratch, ni, g->view, 1e-5f);
            } else {
                b.matmul_add(h, xi, w->view, T, scratch);
                b.rmsnorm(ni, h, g->view, T, 1e-5f);
            }
        }
        const Readback rh = b.readback(h, T * N), r1 = b.readback(n1.whole, T * N + 2 * Guarded::kPad),
                       r2 = b.readback(n2.whole, T * N + 2 * Guarded::kPad);
        b.submit();
        std::vector<float> got = b.fetch(rh);
        for (const Readback& r : {r1, r2}) {
            const std::vector<float> normed = unguard(b.fetch(r), T * N);
            got.insert(got.end(), normed.begin(), normed.end());
        }
        if (b.info().backend == "vulkan") dispatches += (one_op ? -1 : 1) * vulkan_last_step_stats(b).dispatches;
        for (Buf bf : {x, h, scratch, n1.whole, n2.whole}) b.free(bf);
        return got;
    };
    compare_runs(backends, range, K, record);
    CHECK(dispatches == 2 * saved);
}

// Binary16 bits of the words' halves (element 2i in word i's low half), as floats.
std::vector<float> halves(const std::vector<float>& words) {
    std::vector<float> out;
    for (float w : words) {
        const uint32_t u = std::bit_cast<uint32_t>(w);
        out.push_back(f16_to_f32(static_cast<uint16_t>(u & 0xFFFFu)));
        out.push_back(f16_to_f32(static_cast<uint16_t>(u >> 16)));
    }
    return out;
}

// Each binary16 value within one binary16 step of the CPU backend's (the float32 sums differ by the matmul bound,
// which can carry a rounding across a step).
void require_within_half_step(const std::vector<float>& got, const std::vector<float>& want) {
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
        const float a = std::fabs(want[i]);
        const float step = a < 0x1p-14f ? 0x1p-24f : std::ldexp(1.0f, std::ilogb(a) - 10);
        INFO("element " << i << ": " << got[i] << " against " << want[i]);
        REQUIRE(std::fabs(got[i] - want[i]) <= step);
    }
}

// The k (rope_heads > 0: with RoPE) or v product written into a binary16 cache (matmul_store_f16): on the device
// fused and as the product then store_f16, the same bits; against the CPU backend, within one binary16 step.
void check_store_f16(Backends& backends, DType t, int64_t n_heads, int64_t head_dim, int64_t K, int64_t T,
                     int64_t pos0, bool rope, uint64_t range = 0) {
    const int64_t N = n_heads * head_dim;
    INFO(dtype_name(t) << " w [" << N << ", " << K << "] (" << n_heads << " heads of " << head_dim << "), T = " << T
                       << ", pos0 " << pos0 << (rope ? ", RoPE" : ", plain") << ", binding range " << range);
    Filler f;
    const int32_t ix = f.add(random_floats(T * K, 91));
    const Model& m = f.model(n_heads, 1, head_dim, 64);
    auto w = weight("wk", t, N, K, 92);
    auto record = [&](Backend& b, bool fused) {
        return halves(run(b, m, f, ix, T, K, T * N / 2, 0, [&](Buf x, Buf out) {
            Buf scratch = b.alloc(T * N, "scratch");
            if (fused) {
                b.matmul_store_f16(out, x, w->view, T, rope ? n_heads : 0, pos0, scratch);
            } else {
                if (rope) b.matmul_rope(scratch, x, w->view, T, n_heads, pos0);
                else b.matmul(scratch, x, w->view, T);
                b.store_f16(out, scratch, T * N);
            }
            b.free(scratch);
        }));
    };
    Backend& gpu = backends.get(true, range);
    const std::vector<float> want = record(backends.get(false), true);
    const std::vector<float> got = record(gpu, true);
    const std::vector<float> split = record(gpu, false);
    CHECK(got == split);
    require_within_half_step(got, want);
}

// matmul_qkv_f16 (attention's three products, k's and v's rows into a binary16 cache) against matmul_rope and the
// two matmul_store_f16: q's rows, a gap, k's words, a gap, v's words, all in one guarded output. On the device
// the same bits; against the CPU backend q within the matmul bound and k and v within one binary16 step.
// `saved`: dispatches the device saves against the three ops.
void check_qkv_f16(Backends& backends, DType tq, DType tv, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                   int64_t K, int64_t T, int64_t pos0, int64_t saved) {
    const int64_t Nq = n_heads * head_dim, Nk = n_kv_heads * head_dim, gap = 11;
    INFO(dtype_name(tq) << " wq, wk [" << Nq << " / " << Nk << ", " << K << "], " << dtype_name(tv) << " wv, head_dim "
                        << head_dim << ", T = " << T << ", pos0 " << pos0);
    Filler f;
    const int32_t ix = f.add(random_floats(T * K, 185));
    const Model& m = f.model(n_heads, n_kv_heads, head_dim, 64);
    auto wq = weight("wq", tq, Nq, K, 186), wk = weight("wk", tq, Nk, K, 187), wv = weight("wv", tv, Nk, K, 188);
    const int64_t k0 = T * Nq + gap, v0 = k0 + T * Nk / 2 + gap;
    int64_t dispatches = 0;
    auto record = [&](Backend& b, bool one_op) {
        std::vector<float> got = run(b, m, f, ix, T, K, v0 + T * Nk / 2, 0, [&](Buf x, Buf out) {
            const Buf q = out.at(0, T * Nq), k = out.at(k0, T * Nk / 2), v = out.at(v0, T * Nk / 2);
            Buf ks = b.alloc(T * Nk, "k scratch"), vs = b.alloc(T * Nk, "v scratch");
            if (one_op) {
                b.matmul_qkv_f16(q, k, v, x, wq->view, wk->view, wv->view, T, n_heads, n_kv_heads, pos0, ks, vs);
            } else {
                b.matmul_rope(q, x, wq->view, T, n_heads, pos0);
                b.matmul_store_f16(k, x, wk->view, T, n_kv_heads, pos0, ks);
                b.matmul_store_f16(v, x, wv->view, T, 0, pos0, vs);
            }
            b.free(ks);
            b.free(vs);
        });
        if (b.info().backend == "vulkan") dispatches += (one_op ? -1 : 1) * vulkan_last_step_stats(b).dispatches;
        for (int64_t i = 0; i < gap; ++i) {
            REQUIRE(got[static_cast<size_t>(T * Nq + i)] == kSentinel);
            REQUIRE(got[static_cast<size_t>(k0 + T * Nk / 2 + i)] == kSentinel);
        }
        auto words = [&](int64_t first) {
            return halves(std::vector<float>(got.begin() + first, got.begin() + first + T * Nk / 2));
        };
        return std::array<std::vector<float>, 3>{std::vector<float>(got.begin(), got.begin() + T * Nq), words(k0),
                                                 words(v0)};
    };
    Backend& gpu = backends.get(true);
    const auto want = record(backends.get(false), true);
    const auto got = record(gpu, true);
    const auto split = record(gpu, false);
    CHECK(got == split);
    require_close(got[0], want[0], tolerance(K));
    for (size_t part = 1; part < 3; ++part) {
        INFO((part == 1 ? "k" : "v"));
        require_within_half_step(got[part], want[part]);
    }
    CHECK(dispatches == saved);
}

}  // namespace

TEST_CASE("q with k and v into a binary16 cache in one dispatch equal matmul_rope and matmul_store_f16",
          "[vulkan][fused][kvf16]") {
    in_both_shapes([&](Backends& backends, bool gpu_shape) {
        for (DType t : kAllTypes) {
            if (gpu_shape && t != DType::BF16 && t != DType::Q4_K && t != DType::Q8_0) continue;
            check_qkv_f16(backends, t, t, 3, 1, 6, 256, 1, 37, 2);  // 18 q rows: a partial last workgroup
        }
        if (gpu_shape) return;
        check_qkv_f16(backends, DType::BF16, DType::BF16, 4, 2, 8, 256, 3, 61, 2);  // a short prompt
        check_qkv_f16(backends, DType::F32, DType::F32, 2, 1, 6, 20, 1, 5, 2);       // scalar rows
        check_qkv_f16(backends, DType::Q4_K, DType::Q6_K, 2, 1, 8, 256, 1, 9, 1);    // wv of another type
        check_qkv_f16(backends, DType::F16, DType::F16, 2, 1, 16, 64, 20, 3, 2);     // a prompt: 3 passes of 8
    });
    {
        ScopedEnv env("STRATA_VK_MATVEC", "8,3");  // an odd ROWS would split a pair: the three ops
        Backends backends;
        check_qkv_f16(backends, DType::BF16, DType::BF16, 2, 1, 8, 256, 1, 9, 0);
    }
    require_no_validation_messages();
}

TEST_CASE("the k and v products rounded into a binary16 cache in their epilogue equal the product then store_f16",
          "[vulkan][fused][kvf16]") {
    in_both_shapes([&](Backends& backends, bool gpu_shape) {
        for (DType t : kAllTypes) {
            if (gpu_shape && t != DType::BF16 && t != DType::Q4_K && t != DType::Q8_0) continue;
            check_store_f16(backends, t, 3, 8, 256, 1, 37, true);   // k: RoPE, 3 heads of 8, position 37
            check_store_f16(backends, t, 11, 2, 256, 1, 5, false);  // v: 22 rows, a partial last workgroup
        }
        if (gpu_shape) return;
        check_store_f16(backends, DType::F32, 2, 6, 20, 1, 5, true);            // scalar rows; head_dim 6
        check_store_f16(backends, DType::BF16, 2, 16, 64, 3, 62, false);        // a short prompt: 4 tokens a pass
        check_store_f16(backends, DType::F32, 4, 8, 256, 1, 9, true, 16384);    // 16 KiB bindings: chunks of 16 rows
        check_store_f16(backends, DType::F32, 4, 8, 315, 1, 9, false, 16384);   // chunks of 13 rows: the default
        check_store_f16(backends, DType::F16, 2, 16, 64, 20, 3, true);          // a prompt: the tiled product
    });
    {
        // An odd number of rows per workgroup would split a pair: the op falls back to the product and the store.
        ScopedEnv env("STRATA_VK_MATVEC", "8,3");
        Backends backends;
        check_store_f16(backends, DType::BF16, 3, 8, 256, 1, 37, true);
        check_store_f16(backends, DType::BF16, 3, 8, 256, 1, 37, false);
    }
    require_no_validation_messages();
}

TEST_CASE("w1 and w3 with SwiGLU in one dispatch equal matmul, matmul and swiglu, for every weight type",
          "[vulkan][fused]") {
    // In both shapes each type's 16-byte form at T = 1 (decode); in the device's a few of the other forms.
    in_both_shapes([&](Backends& backends, bool gpu_shape) {
        for (DType t : kAllTypes) {
            if (gpu_shape && t != DType::BF16 && t != DType::Q4_K && t != DType::Q6_K) continue;
            check_swiglu(backends, t, 22, 256, 1);  // 22 rows: a partial last workgroup
        }
        if (gpu_shape) return;
        check_swiglu(backends, DType::F16, 13, 36, 1);         // a row length without 16-byte words: scalar
        check_swiglu(backends, DType::Q8_0, 13, 96, 1, 1);     // x off a 16-byte boundary: scalar x loads
        check_swiglu(backends, DType::BF16, 22, 256, 3);       // a short prompt: 4 tokens per pass
        check_swiglu(backends, DType::F32, 40, 256, 1, 0, 16384);  // 16 KiB bindings: each weight in 3 chunks
    });
    require_no_validation_messages();
}

TEST_CASE("RoPE in the q/k product's epilogue equals matmul then rope, for every weight type", "[vulkan][fused]") {
    in_both_shapes([&](Backends& backends, bool gpu_shape) {
        for (DType t : kAllTypes) {
            if (gpu_shape && t != DType::F16 && t != DType::Q5_K && t != DType::Q4_0) continue;
            check_rope(backends, t, 3, 8, 256, 1, 37);  // decode: 3 heads of 8, position 37
        }
        if (gpu_shape) return;
        check_rope(backends, DType::F32, 2, 6, 20, 1, 5);             // scalar rows; head_dim 6
        check_rope(backends, DType::BF16, 2, 16, 64, 3, 62, true);    // a short prompt past max_seq_len, scaled
        check_rope(backends, DType::F32, 4, 8, 256, 1, 9, false, 16384);  // 16 KiB bindings: chunks of 16 rows
        // Chunks of 13 rows would split a pair: the op falls back to matmul then rope.
        check_rope(backends, DType::F32, 4, 8, 315, 1, 9, false, 16384);
    });
    {
        // An odd number of rows per workgroup would split a pair: the op falls back to matmul then rope.
        ScopedEnv env("STRATA_VK_MATVEC", "8,3");
        Backends backends;
        check_rope(backends, DType::BF16, 3, 8, 256, 1, 37);
    }
    require_no_validation_messages();
}

TEST_CASE("wq, wk and wv in one dispatch equal their products with RoPE on q and k, for every weight type",
          "[vulkan][fused]") {
    in_both_shapes([&](Backends& backends, bool gpu_shape) {
        for (DType t : kAllTypes) {
            if (gpu_shape && t != DType::BF16 && t != DType::Q4_K && t != DType::Q6_K) continue;
            // Decode: 3 query heads of 6 (18 rows: a partial last workgroup) and 1 KV head, position 37.
            check_qkv(backends, t, t, t, 3, 1, 6, 256, 1, 37, 2);
        }
        if (gpu_shape) return;
        check_qkv(backends, DType::BF16, DType::BF16, DType::BF16, 4, 2, 8, 256, 3, 61, 2);  // a short prompt
        check_qkv(backends, DType::F16, DType::F16, DType::F16, 2, 1, 8, 36, 1, 5, 2);  // no 16-byte words: scalar
        check_qkv(backends, DType::Q8_0, DType::Q8_0, DType::Q8_0, 2, 2, 8, 96, 1, 5, 2, 1);  // x off 16 bytes
        // wv of another type (a Q4_K_M file's Q6_K layers): wq and wk in one dispatch, wv's on its own.
        check_qkv(backends, DType::Q4_K, DType::Q4_K, DType::Q6_K, 2, 1, 8, 256, 1, 9, 1);
        // None in one: wq and wk of different types, weights in chunks (16 KiB bindings), a pair split across
        // workgroups (3 rows each, below).
        check_qkv(backends, DType::Q4_K, DType::Q6_K, DType::Q4_K, 2, 1, 8, 256, 1, 9, 0);
        check_qkv(backends, DType::F32, DType::F32, DType::F32, 4, 4, 8, 256, 1, 9, 0, 0, 16384);
    });
    {
        ScopedEnv env("STRATA_VK_MATVEC", "8,3");
        Backends backends;
        check_qkv(backends, DType::BF16, DType::BF16, DType::BF16, 2, 1, 8, 256, 1, 9, 0);
    }
    require_no_validation_messages();
}

TEST_CASE("wo's residual add and the RMSNorm after it in one dispatch equal matmul_add then rmsnorm",
          "[vulkan][fused]") {
    in_both_shapes([&](Backends& backends, bool gpu_shape) {
        for (DType t : kAllTypes) {
            if (gpu_shape && t != DType::BF16 && t != DType::Q4_K && t != DType::Q6_K) continue;
            check_add_norm(backends, t, DType::F32, 70, 256, 1, 1);  // 70 rows: a partial last workgroup
        }
        check_add_norm(backends, DType::BF16, DType::BF16, 300, 64, 1, 1);  // the gain in 16 bits, rows > 256
        check_add_norm(backends, DType::F16, DType::F16, 64, 64, 1, 1);
        if (gpu_shape) return;
        check_add_norm(backends, DType::F16, DType::F32, 13, 36, 1, 1);   // no 16-byte words: scalar
        check_add_norm(backends, DType::BF16, DType::F32, 22, 256, 3, 1);  // a short prompt: one pass of 4 tokens
        check_add_norm(backends, DType::F32, DType::F32, 40, 256, 1, 0, 16384);  // 16 KiB bindings: chunks
    });
    require_no_validation_messages();
}

TEST_CASE("the float types' matvec gives the same bits with any number of loads in flight", "[vulkan][fused]") {
    // LOADS batches each invocation's weight loads and then sums them in the order of one at a time. A GPU's
    // shape; rows of 657 16-byte words (16-bit types; 1314 for f32), 5 or 11 iterations per invocation, so LOADS
    // 3 ends in a partial batch and 8 has batches past the row's end; the plain product and the SwiGLU form (two
    // matrices' loads in each batch), decode and a short prompt.
    ScopedEnv shape("STRATA_VK_MATVEC", "128,2");
    std::map<std::string, std::unique_ptr<Backend>> gpus;
    for (const char* loads : {"1", "3", "8"}) {
        ScopedEnv env("STRATA_VK_MATVEC_LOADS", loads);
        gpus[loads] = make_vulkan();
    }
    const int64_t N = 18, K = 8 * 657;
    for (DType t : {DType::F32, DType::F16, DType::BF16}) {
        for (int64_t T : {1, 3}) {
            INFO(dtype_name(t) << " [" << N << ", " << K << "], T = " << T);
            Filler f;
            const int32_t ix = f.add(random_floats(T * K, 91));
            const Model& m = f.model();
            auto w1 = weight("w1", t, N, K, 92), w3 = weight("w3", t, N, K, 93);
            auto record = [&](Backend& b) {
                return run(b, m, f, ix, T, K, 2 * T * N, 0, [&](Buf x, Buf out) {
                    Buf a = b.alloc(T * N, "a"), g = b.alloc(T * N, "g");
                    b.matmul(out.at(0, T * N), x, w1->view, T);
                    b.matmul_swiglu(out.at(T * N, T * N), x, w1->view, w3->view, T, a, g);
                    b.free(a);
                    b.free(g);
                });
            };
            const std::vector<float> one = record(*gpus["1"]);
            for (const char* loads : {"3", "8"}) {
                INFO("STRATA_VK_MATVEC_LOADS=" << loads);
                CHECK(record(*gpus[loads]) == one);
            }
        }
    }
    require_no_validation_messages();
}

TEST_CASE("the fused kernels change no bit of a pass, and cut dispatches and barriers per decode step",
          "[vulkan][fused][model][golden]") {
    // The golden model's short prompt and two decode steps with every fusion on (the default) and with
    // STRATA_VK_FUSE=0 (matmul_add, matmul_swiglu and matmul_rope as the interface's defaults), synchronization
    // validation on for both.
    const ScopedEnv sync("STRATA_VK_SYNC_VALIDATION", "1");
    const auto model = load_model(golden_hf_dir());
    const ModelConfig& c = model->config;
    const std::vector<int32_t> tokens = expected()["prompts"]["short"]["tokens"].get<std::vector<int32_t>>();
    struct Run {
        Trace prompt, step1, step2;
        VulkanStepStats stats;
    };
    auto run_model = [&](bool fuse) {
        const ScopedEnv env("STRATA_VK_FUSE", fuse ? "1" : "0");
        auto gpu = make_vulkan();
        gpu->load(*model);
        Transformer tf(*model, *gpu);
        KVCache cache(*gpu, c, 32);
        TraceRequest req;
        req.names.insert("layers.1.q");
        req.names.insert("layers.1.k");
        req.names.insert("layers.1.ffn_hidden");
        req.names.insert("layers.1.attention_norm");
        req.names.insert("layers.1.ffn_norm");
        Run r;
        r.prompt = tf.prefill(cache, tokens, req);
        r.step1 = tf.decode(cache, tokens[1], req);
        r.step2 = tf.decode(cache, tokens[2], TraceRequest{});
        r.stats = vulkan_last_step_stats(*gpu);
        return r;
    };
    const Run fused = run_model(true), unfused = run_model(false);
    for (const char* name :
         {"layers.1.q", "layers.1.k", "layers.1.ffn_hidden", "layers.1.attention_norm", "layers.1.ffn_norm", "h.1",
          "norm"}) {
        INFO(name);
        REQUIRE(fused.prompt.find(name) != nullptr);
        CHECK(fused.prompt.find(name)->data == unfused.prompt.find(name)->data);
        CHECK(fused.step1.find(name)->data == unfused.step1.find(name)->data);
    }
    CHECK(fused.prompt.last_logits == unfused.prompt.last_logits);
    CHECK(fused.step1.last_logits == unfused.step1.last_logits);
    CHECK(fused.step2.last_logits == unfused.step2.last_logits);
    // Per layer: w3's product and swiglu, the two ropes, the two adds, wk's and wv's own products, ffn_norm and
    // the norm after the block (the next block's attention_norm or the final norm): 10 dispatches; barriers: the
    // ones before swiglu, each add and each of those norms, and before the ropes (two of them unfused: the
    // default runs each rope right after its product, where the hand-ordered pass of before ran both after wv
    // behind one).
    INFO("dispatches " << fused.stats.dispatches << " vs " << unfused.stats.dispatches << ", barriers "
                       << fused.stats.barriers << " vs " << unfused.stats.barriers);
    CHECK(fused.stats.dispatches + 10 * c.n_layers == unfused.stats.dispatches);
    CHECK(fused.stats.barriers + 7 * c.n_layers == unfused.stats.barriers);
    require_no_validation_messages();
}
