// Every Vulkan op against the CPU reference backend on random inputs: awkward sizes, every stored weight type,
// normalised error, NaN/Inf, sentinels around each output, and no validation message.
#include <cmath>
#include <functional>
#include <limits>
#include <map>

#include "vk_helpers.hpp"

using namespace strata;
using namespace strata::test;

namespace {

// The backends of one test case, one per kind and binding range, reused by its checks: lavapipe compiles each
// pipeline once per backend, and that dominates these small tests.
class Backends {
public:
    Backend& get(bool vulkan, uint64_t max_binding_range) {
        auto& b = backends_[{vulkan, max_binding_range}];
        if (!b) b = vulkan ? make_vulkan(max_binding_range) : make_cpu();
        return *b;
    }

private:
    std::map<std::pair<bool, uint64_t>, std::unique_ptr<Backend>> backends_;
};

// Runs `record` on the CPU backend and on the Vulkan backend (after loading m into both); returns both outputs.
template <class F>
std::pair<std::vector<float>, std::vector<float>> on_both(Backends& backends, const Model& m, F&& record,
                                                          uint64_t max_binding_range = 0) {
    Backend& cpu = backends.get(false, 0);
    Backend& gpu = backends.get(true, max_binding_range);
    cpu.load(m);
    gpu.load(m);
    std::vector<float> want = record(cpu);
    std::vector<float> got = record(gpu);
    return {got, want};
}

std::vector<float> run_guarded(Backend& b, const Filler& f, int64_t n, const std::function<void(Buf)>& op) {
    b.begin();
    Guarded out = Guarded::make(b, f, n, "out");
    op(out.inner());
    Readback r = b.readback(out.whole, n + 2 * Guarded::kPad);
    b.submit();
    return unguard(b.fetch(r), n);
}

const DType kTypes[] = {DType::F32, DType::F16, DType::BF16};

}  // namespace

TEST_CASE("devices are listed and one is chosen", "[vulkan]") {
    const auto devices = list_vulkan_devices();
    REQUIRE(!devices.empty());
    int chosen = 0;
    for (const auto& d : devices) {
        INFO(d.name << " " << d.type << " " << d.driver);
        CHECK(!d.name.empty());
        CHECK(!d.api_version.empty());
        chosen += d.chosen ? 1 : 0;
    }
    REQUIRE(chosen == 1);
    auto gpu = make_vulkan();
    const BackendInfo info = gpu->info();
    CHECK(info.backend == "vulkan");
    CHECK(!info.device.empty());
    require_no_validation_messages();
}

TEST_CASE("add, copy and swiglu match the CPU backend", "[vulkan]") {
    Backends backends;
    for (int64_t n : {1, 255, 257, 1000}) {
        Filler f;
        const int32_t ia = f.add(random_floats(n, 1, 3.0f)), ib = f.add(random_floats(n, 2));
        const Model& m = f.model();
        for (int op = 0; op < 4; ++op) {
            INFO("n = " << n << ", op " << op);
            auto [got, want] = on_both(backends, m, [&](Backend& b) {
                Buf A = b.alloc(n, "a"), B = b.alloc(n, "b");
                b.begin();
                f.fill(b, A, ia, n);
                f.fill(b, B, ib, n);
                b.submit();
                return run_guarded(b, f, n, [&](Buf out) {
                    switch (op) {
                        case 0: b.add(out, A, B, n); break;
                        case 1: b.copy(out, A, n); break;
                        case 2: b.swiglu(out, A, B, n); break;
                        default:  // in place, as the residual stream does it: h = h + f(h)
                            b.add(A, A, B, n);
                            b.copy(out, A, n);
                    }
                });
            });
            require_close(got, want, 1e-6);
        }
    }
    require_no_validation_messages();
}

TEST_CASE("embed matches the CPU backend for every weight type, also split over bindings", "[vulkan]") {
    Backends backends;
    const int64_t V = 1000, W = 24;
    const std::vector<int32_t> tokens = {0, 999, 5, 5, 500, 123};
    const auto T = static_cast<int64_t>(tokens.size());
    for (DType type : kTypes) {
        for (uint64_t range : {uint64_t(0), uint64_t(16384)}) {
            INFO(dtype_name(type) << ", binding range " << range);
            Model m;
            m.config.dim = W;
            m.config.n_layers = 1;
            m.config.n_heads = 1;
            m.config.n_kv_heads = 1;
            m.config.head_dim = 2;
            m.config.hidden_dim = 1;
            m.config.vocab_size = V;
            m.config.bos_id = 0;
            auto table = random_tensor("tok_embeddings", type, {V, W}, 7);
            m.tensors["tok_embeddings"] = table->view;
            auto [got, want] = on_both(
                backends, m,
                [&](Backend& b) {
                    Buf out = b.alloc(T * W + 2 * Guarded::kPad, "out");  // zeros around the rows
                    b.begin();
                    b.embed(out.at(Guarded::kPad, T * W), tokens);
                    Readback r = b.readback(out, T * W + 2 * Guarded::kPad);
                    b.submit();
                    return b.fetch(r);
                },
                range);
            REQUIRE(got == want);
            for (int64_t i = 0; i < Guarded::kPad; ++i) REQUIRE((got[i] == 0 && got[got.size() - 1 - i] == 0));
        }
    }
    require_no_validation_messages();
}

TEST_CASE("rmsnorm matches the CPU backend", "[vulkan]") {
    // The device's workgroup (lavapipe: 256), then a GPU's (1024: more invocations than some rows have elements).
    for (const char* wg : {"", "1024"}) {
        ScopedEnv env("STRATA_VK_NORM_WG", wg);
        Backends backends;
        for (DType type : kTypes) {
            for (int64_t n : {1, 7, 300, 1000}) {
                for (int64_t T : {1, 3}) {
                    INFO(dtype_name(type) << " n = " << n << " T = " << T << " STRATA_VK_NORM_WG=" << wg);
                    Filler f;
                    const int32_t ix = f.add(random_floats(T * n, 11, 2.0f));
                    auto weight = random_tensor("norm", type, {n}, 12);
                    const Model& m = f.model();
                    auto [got, want] = on_both(backends, m, [&](Backend& b) {
                        Buf x = b.alloc(T * n, "x");
                        b.begin();
                        f.fill(b, x, ix, T * n);
                        b.submit();
                        return run_guarded(b, f, T * n, [&](Buf out) { b.rmsnorm(out, x, weight->view, T, 1e-5f); });
                    });
                    require_close(got, want, 1e-5);
                }
            }
        }
    }
    require_no_validation_messages();
}

namespace {

void check_matmul(Backends& backends, DType type, int64_t N, int64_t K, int64_t T, int64_t x_offset,
                  uint64_t range = 0) {
    INFO(dtype_name(type) << " w [" << N << ", " << K << "], T = " << T << ", x offset " << x_offset
                          << ", binding range " << range);
    Filler f;
    const int32_t ix = f.add(random_floats(T * K, 21));
    auto w = random_tensor("w", type, {N, K}, 22, 0.1f);
    const Model& m = f.model();
    auto [got, want] = on_both(
        backends, m,
        [&](Backend& b) {
            Buf x = b.alloc(x_offset + T * K, "x");
            b.begin();
            f.fill(b, x.at(x_offset, T * K), ix, T * K);
            b.submit();
            return run_guarded(b, f, T * N, [&](Buf out) { b.matmul(out, x.at(x_offset, T * K), w->view, T); });
        },
        range);
    require_close(got, want, 2e-6 * std::sqrt(double(K)) + 1e-6);
}

}  // namespace

TEST_CASE("matmul for decode (T = 1) matches the CPU backend, in each workgroup shape", "[vulkan]") {
    // The device's own shape (one subgroup per workgroup on lavapipe), then a GPU's: several subgroups per
    // workgroup, reduced through shared memory, with 3 loads per row in flight (LOADS; 4096-wide rows end in a
    // partial batch).
    for (const char* shape : {"", "128,2", "64,4"}) {
        INFO("STRATA_VK_MATVEC=" << shape);
        ScopedEnv env("STRATA_VK_MATVEC", shape);
        ScopedEnv loads("STRATA_VK_MATVEC_LOADS", std::string(shape).empty() ? "" : "3");
        Backends backends;
        for (DType type : kTypes) {
            check_matmul(backends, type, 1, 8, 1, 0);     // one row
            check_matmul(backends, type, 37, 13, 1, 0);   // odd row length: the scalar kernel
            check_matmul(backends, type, 64, 256, 1, 0);  // 16-byte loads
            check_matmul(backends, type, 3, 4096, 1, 0);  // long rows
            check_matmul(backends, type, 33, 64, 1, 1);   // x not on a 16-byte boundary: the scalar kernel
        }
        // More workgroups than one dispatch dimension allows (140000 rows / 2 rows per workgroup > 65535).
        if (std::string(shape) != "64,4") check_matmul(backends, DType::BF16, 140000, 8, 1, 0);
    }
    require_no_validation_messages();
}

TEST_CASE("matmul for prefill (T > 1) matches the CPU backend, streaming and tiled", "[vulkan]") {
    struct Mode {
        const char* tiled_from;
        const char* matvec;
        const char* tile8 = "";
    };
    // Short prompts stream the weights (matvec.comp, several tokens per load, in the device's shape and in a
    // GPU's); the tiled kernel (matmul.comp) takes long ones, from 2 tokens here so that every shape reaches it,
    // with 4 x 8 and with 8 x 8 outputs per invocation (TILE8).
    for (const Mode& mode :
         {Mode{"1000000", ""}, Mode{"1000000", "128,2"}, Mode{"2", ""}, Mode{"2", "", "1"}}) {
        INFO("STRATA_VK_TILED_FROM=" << mode.tiled_from << " STRATA_VK_MATVEC=" << mode.matvec
                                     << " STRATA_VK_MATMUL_TILE8=" << mode.tile8);
        ScopedEnv tiled("STRATA_VK_TILED_FROM", mode.tiled_from);
        ScopedEnv shape("STRATA_VK_MATVEC", mode.matvec);
        ScopedEnv tile8("STRATA_VK_MATMUL_TILE8", mode.tile8);
        Backends backends;
        for (DType type : kTypes) {
            check_matmul(backends, type, 37, 13, 2, 0);
            check_matmul(backends, type, 130, 200, 5, 0);
            check_matmul(backends, type, 65, 96, 70, 3);  // more than one tile of tokens and rows
            // Two tiles of 128 rows and of 64 tokens with 16-byte x and weight loads (tiled); depth 20 ends in
            // a partial slice, with 16-byte loads of f32 weights and single ones of 16-bit weights.
            check_matmul(backends, type, 200, 64, 70, 0);
            check_matmul(backends, type, 129, 20, 65, 4);
        }
        check_matmul(backends, DType::F16, 33, 64, 11, 0);  // several groups of 8 tokens, 16-byte loads
    }
    require_no_validation_messages();
}

TEST_CASE("the tiled matmul gives the same bits with 8 x 8 outputs per invocation as with 4 x 8", "[vulkan]") {
    // TILE8 changes which invocation computes an output and how the slices are loaded, not the sum: each output is
    // the same float32 products added in the same order. Two tiles of tokens and rows (partial last ones), 16-byte
    // loads, x off a 16-byte boundary, a partial last slice (depth 20), an odd depth (13: single weight loads).
    ScopedEnv tiled("STRATA_VK_TILED_FROM", "2");
    std::unique_ptr<Backend> four, eight;
    {
        ScopedEnv env("STRATA_VK_MATMUL_TILE8", "0");
        four = make_vulkan();
    }
    {
        ScopedEnv env("STRATA_VK_MATMUL_TILE8", "1");
        eight = make_vulkan();
    }
    CHECK_THAT(eight->info().kernels, Catch::Contains("8 x 8 per invocation"));
    struct Shape {
        int64_t N, K, T, x_offset;
    };
    for (DType type : kTypes)
        for (const Shape& sh : {Shape{200, 64, 70, 0}, Shape{129, 64, 65, 3}, Shape{130, 20, 66, 4},
                                Shape{37, 13, 9, 0}}) {
            INFO(dtype_name(type) << " w [" << sh.N << ", " << sh.K << "], T = " << sh.T << ", x offset "
                                  << sh.x_offset);
            Filler f;
            const int32_t ix = f.add(random_floats(sh.T * sh.K, 31));
            auto w = random_tensor("w", type, {sh.N, sh.K}, 32, 0.1f);
            const Model& m = f.model();
            auto record = [&](Backend& b) {
                b.load(m);
                Buf x = b.alloc(sh.x_offset + sh.T * sh.K, "x");
                b.begin();
                f.fill(b, x.at(sh.x_offset, sh.T * sh.K), ix, sh.T * sh.K);
                b.submit();
                std::vector<float> out = run_guarded(
                    b, f, sh.T * sh.N, [&](Buf o) { b.matmul(o, x.at(sh.x_offset, sh.T * sh.K), w->view, sh.T); });
                b.free(x);
                return out;
            };
            CHECK(record(*eight) == record(*four));
        }
    require_no_validation_messages();
}

TEST_CASE("matmul_add adds the product into its output, fused or not, as matmul then add does", "[vulkan]") {
    // Decode and short prompts run the fused kernel (matvec.comp ACCUMULATE); from 2 tokens on with
    // STRATA_VK_TILED_FROM=2 the tiled product and an add (the default). Either way: the CPU backend's result,
    // and on the device bit for bit what matmul into scratch and add give.
    for (const char* tiled_from : {"1000000", "2"}) {
        INFO("STRATA_VK_TILED_FROM=" << tiled_from);
        ScopedEnv tiled("STRATA_VK_TILED_FROM", tiled_from);
        Backends backends;
        for (DType type : kTypes) {
            for (int64_t T : {1, 5}) {
                const int64_t N = 40, K = 64;
                INFO(dtype_name(type) << " T = " << T);
                Filler f;
                const int32_t ix = f.add(random_floats(T * K, 31));
                const int32_t iy = f.add(random_floats(T * N, 32));
                auto w = random_tensor("w", type, {N, K}, 33, 0.1f);
                const Model& m = f.model();
                std::vector<float> split;
                auto run = [&](Backend& b, bool fused) {
                    Buf x = b.alloc(T * K, "x"), scratch = b.alloc(T * N, "scratch");
                    b.begin();
                    f.fill(b, x, ix, T * K);
                    b.submit();
                    return run_guarded(b, f, T * N, [&](Buf out) {
                        f.fill(b, out, iy, T * N);
                        if (fused) {
                            b.matmul_add(out, x, w->view, T, scratch);
                        } else {
                            b.matmul(scratch, x, w->view, T);
                            b.add(out, out, scratch, T * N);
                        }
                    });
                };
                auto [got, want] = on_both(backends, m, [&](Backend& b) {
                    if (b.info().backend == "vulkan") split = run(b, false);
                    return run(b, true);
                });
                require_close(got, want, 2e-6 * std::sqrt(double(K)) + 1e-6);
                CHECK(got == split);
            }
        }
    }
    require_no_validation_messages();
}

TEST_CASE("a weight split across several bindings gives the same result", "[vulkan]") {
    Backends backends;
    // 16 KiB per binding: w [130, 200] f32 (800-byte rows) becomes 27 chunks; x and out are split by tokens.
    check_matmul(backends, DType::F32, 130, 200, 1, 0, 16384);
    check_matmul(backends, DType::BF16, 130, 200, 1, 0, 16384);
    check_matmul(backends, DType::F32, 130, 200, 9, 0, 16384);
    check_matmul(backends, DType::F16, 70, 24, 40, 0, 16384);
    require_no_validation_messages();
}

TEST_CASE("rope matches the CPU backend", "[vulkan]") {
    Backends backends;
    struct Case {
        int64_t head_dim, n_heads, T, pos0;
        bool scaled;
    };
    for (const Case& c : {Case{2, 1, 1, 0, false}, Case{64, 3, 4, 0, true}, Case{128, 2, 1, 37, true},
                          Case{64, 1, 3, 100, false} /* beyond max_seq_len: the table grows */}) {
        INFO("head_dim " << c.head_dim << " n_heads " << c.n_heads << " T " << c.T << " pos0 " << c.pos0);
        const int64_t n = c.T * c.n_heads * c.head_dim;
        Filler f;
        const int32_t ix = f.add(random_floats(n, 31));
        const Model& m = f.model(c.n_heads, 1, c.head_dim, 64, c.scaled);
        auto [got, want] = on_both(backends, m, [&](Backend& b) {
            return run_guarded(b, f, n, [&](Buf x) {
                f.fill(b, x, ix, n);
                b.rope(x, c.T, c.n_heads, c.pos0);
            });
        });
        require_close(got, want, 1e-6);
    }
    require_no_validation_messages();
}

TEST_CASE("attention matches the CPU backend (grouped-query, causal, probs, split keys)", "[vulkan]") {
    struct Case {
        int64_t n_heads, n_kv_heads, head_dim, T, pos0;
    };
    // The default path, then with the keys of every decode (up to 4 queries) split over workgroups and merged
    // (in this device's large splits and in splits of 16 keys or more over about 64 workgroups);
    // each with the query heads of a KV head in one workgroup (attention_grouped.comp, where no probabilities are
    // asked for) and with a workgroup per query head (attention.comp); then every prompt and decode step in
    // flash-attention tiles (attention_flash.comp, where the device has subgroup shuffles), on longer prompts too,
    // with this device's lanes per row and with at most two (a device of small subgroups: more dims per lane,
    // more rows per tile; head_dim 96, 128 and 256 then have none that fits and take the grouped kernel), and in
    // workgroups of 256 and 512 invocations (twice and four times the rows per staged key and value block).
    // Grouped shapes: the demo's 4 heads per KV head at head_dim 32, Llama 3 8B's 4 at 128 (two queries per
    // workgroup, an odd T leaves the last workgroup one), 8 at 64, 4 x 256 (the most one workgroup holds),
    // head_dim 96 (lanes idle), 16 heads per KV head (too many: attention.comp runs).
    const std::vector<Case> short_cases{
        Case{2, 1, 64, 1, 0},   Case{4, 2, 128, 5, 3}, Case{3, 3, 8, 1, 130},   Case{2, 1, 64, 7, 140},
        Case{1, 1, 256, 2, 1},  Case{2, 1, 64, 3, 600}, Case{4, 2, 128, 1, 300}, Case{8, 2, 32, 6, 20},
        Case{8, 2, 32, 1, 300}, Case{8, 2, 128, 9, 40}, Case{8, 1, 64, 3, 70},  Case{4, 1, 256, 3, 33},
        Case{4, 2, 96, 4, 17},  Case{16, 1, 16, 2, 5}};
    // Flash tiles over several query and key blocks: the demo's shape (64 rows of 2 lanes, 32-key blocks), 8B's
    // (16 rows of 8 lanes, 16-key blocks), head_dim 256 (32 dims per lane, 8-key blocks), 16 heads per KV head at
    // head_dim 16 (one lane per row), no grouping at head_dim 8, head_dim 96 (4 lanes of 24 dims), and 70 queries
    // of a KV head with two heads (the last query block partial, causal across block edges).
    std::vector<Case> flash_cases = short_cases;
    for (const Case& c : {Case{8, 2, 32, 40, 3}, Case{8, 2, 128, 21, 5}, Case{4, 1, 256, 10, 20},
                          Case{16, 1, 16, 33, 0}, Case{3, 3, 8, 17, 2}, Case{4, 2, 96, 19, 40}, Case{2, 1, 64, 70, 0}})
        flash_cases.push_back(c);
    struct Mode {
        const char *grouped, *split_from, *flash_from;
    };
    for (const Mode& mode : {Mode{"1", "1000000", "0"}, Mode{"1", "1", "0"}, Mode{"1", "1,16,64", "0"},
                             Mode{"0", "1000000", "0"}, Mode{"0", "1", "0"}, Mode{"0", "1,16,64", "0"},
                             Mode{"1", "1000000", "1"}, Mode{"1", "1000000", "1,2"} /* at most 2 lanes per row */,
                             Mode{"1", "1000000", "1,8,256"}, Mode{"1", "1000000", "1,8,512"} /* larger tiles */}) {
        const char *grouped = mode.grouped, *split_from = mode.split_from;
        ScopedEnv env_grouped("STRATA_VK_ATTN_GROUPED", grouped);
        ScopedEnv env("STRATA_VK_ATTN_SPLIT_FROM", split_from);
        ScopedEnv env_flash("STRATA_VK_ATTN_FLASH_FROM", mode.flash_from);
        Backends backends;
        for (const Case& c : std::string(mode.flash_from) == "0" ? short_cases : flash_cases) {
            for (bool probs : {false, true}) {
                INFO("grouped " << grouped << " split from " << split_from << " flash from " << mode.flash_from
                                << " heads " << c.n_heads << ":"
                                << c.n_kv_heads << " head_dim " << c.head_dim << " T " << c.T << " pos0 " << c.pos0
                                << " probs " << probs);
                const int64_t q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim, L = c.pos0 + c.T;
                Filler f;
                const int32_t iq = f.add(random_floats(c.T * q_dim, 41));
                const int32_t ik = f.add(random_floats(L * kv_dim, 42));
                const int32_t iv = f.add(random_floats(L * kv_dim, 43));
                const Model& m = f.model(c.n_heads, c.n_kv_heads, c.head_dim, 1024);
                auto [got, want] = on_both(backends, m, [&](Backend& b) {
                    Buf q = b.alloc(c.T * q_dim, "q"), k = b.alloc(L * kv_dim, "k"), v = b.alloc(L * kv_dim, "v");
                    b.begin();
                    f.fill(b, q, iq, c.T * q_dim);
                    f.fill(b, k, ik, L * kv_dim);
                    f.fill(b, v, iv, L * kv_dim);
                    Guarded out = Guarded::make(b, f, c.T * q_dim, "out");
                    Guarded p = Guarded::make(b, f, c.n_heads * c.T * L, "probs");
                    b.attention(out.inner(), q, k, v, c.T, c.pos0, probs ? p.inner() : Buf{});
                    Readback ro = b.readback(out.whole, c.T * q_dim + 2 * Guarded::kPad);
                    Readback rp = b.readback(p.whole, c.n_heads * c.T * L + 2 * Guarded::kPad);
                    b.submit();
                    std::vector<float> all = unguard(b.fetch(ro), c.T * q_dim);
                    std::vector<float> pr = unguard(b.fetch(rp), c.n_heads * c.T * L);
                    if (probs)
                        all.insert(all.end(), pr.begin(), pr.end());
                    else
                        for (float x : pr) REQUIRE(x == kSentinel);  // no probs requested: untouched
                    return all;
                });
                require_close(got, want, 1e-5);
            }
        }
    }
    require_no_validation_messages();
}

TEST_CASE("top-k matches the CPU backend (ties by lower id, -inf, NaN)", "[vulkan]") {
    // The device's own workgroup shape, then a GPU's (256 invocations, winners merged through shared memory).
    for (const char* wg : {"", "256"})
        for (int64_t n : {1, 10, 4097, 140000}) {
            for (int64_t k : {1, 10, 64, 100}) {
                INFO("STRATA_VK_TOPK_WG=" << wg << " n " << n << " k " << k);
                ScopedEnv env("STRATA_VK_TOPK_WG", wg);
                std::vector<float> row = random_floats(n, 51);
                for (float& x : row) x = std::round(x * 4.0f) / 4.0f;  // many ties
                if (n > 5) {
                    row[3] = -std::numeric_limits<float>::infinity();
                    row[4] = std::numeric_limits<float>::quiet_NaN();
                    row[static_cast<size_t>(n - 1)] = 100.0f;  // the winner sits at the end
                }
                Filler f;
                const int32_t ir = f.add(row);
                const Model& m = f.model();
                std::vector<TokenScore> results[2];
                int which = 0;
                for (auto& b : {make_cpu(), make_vulkan()}) {
                    b->load(m);
                    Buf x = b->alloc(n + 5, "row");
                    b->begin();
                    f.fill(*b, x.at(5, n), ir, n);
                    Readback r = b->topk(x.at(5, n), n, k);
                    b->submit();
                    results[which++] = b->topk_result(r);
                }
                const auto& want = results[0];
                const auto& got = results[1];
                REQUIRE(got.size() == want.size());
                REQUIRE(static_cast<int64_t>(got.size()) == std::min(n, k));
                for (size_t i = 0; i < got.size(); ++i) {
                    INFO("rank " << i);
                    REQUIRE(got[i].id == want[i].id);
                    REQUIRE((got[i].logit == want[i].logit || (std::isnan(got[i].logit) && std::isnan(want[i].logit))));
                }
            }
        }
    require_no_validation_messages();
}
