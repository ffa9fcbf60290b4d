// The prefill matmul on matrix units (matmul_coopmat.comp, VK_NV_cooperative_matrix). Lavapipe has none, so the
// kernel's emulated form runs here (STRATA_VK_COOPMAT=emulated): the same staging (16-byte and single loads of
// x and of every weight type, binary16 rounding and clamping, partial tiles and slices, the guarded stores)
// with float32 FMAs where the matrix instructions would be. Its result must be the product of the operands as
// binary16 (float32 sums, in another order), computed here on the host; and the CPU backend's within binary16's
// rounding. Where the device has matrix units the real kernel runs the same cases, after the backend checked it
// when it was made (coopmat_check.cpp; the emulated form goes through the same check here). Only the fast path
// (BackendOptions::exact false: bench, generate) takes matrix units by default; STRATA_VK_COOPMAT=1 forces them.
#include <cmath>

#include "strata/dtype.hpp"
#include "strata/npy.hpp"
#include "strata/quant.hpp"
#include "strata/transformer.hpp"
#include "vk_helpers.hpp"

using namespace strata;
using namespace strata::test;

namespace {

const DType kAllTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0,
                           DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};

float as_half(float v) { return f16_to_f32(f32_to_f16_saturating(v)); }

// The modes to run: the emulation everywhere, and the matrix units where a device has them.
std::vector<const char*> coopmat_modes() {
    std::vector<const char*> modes{"emulated"};
    for (const VulkanDeviceInfo& d : list_vulkan_devices())
        if (d.chosen && d.cooperative_matrix) modes.push_back("1");
    return modes;
}

std::unique_ptr<OwnedTensor> weights(DType t, int64_t N, int64_t K, uint64_t seed) {
    std::vector<float> v = random_floats(N * K, seed, 0.1f);
    if (dtype_is_block(t)) {
        auto owned = std::make_unique<OwnedTensor>();
        owned->bytes.resize(dtype_bytes(t, N * K));
        quant::quantize(t, v.data(), owned->bytes.data(), N * K);
        view_own_bytes(*owned, "w", t, {N, K});
        return owned;
    }
    return make_tensor("w", t, {N, K}, v);
}

// |got - sum_k h(x) h(w)| <= tol * sum_k |h(x) h(w)| for every output, h the host's binary16 rounding (nearest,
// ties to even, finite values beyond the range to +-65504).
void require_half_product(const std::vector<float>& got, const std::vector<float>& w, const std::vector<float>& x,
                          int64_t N, int64_t K, int64_t T, double tol) {
    REQUIRE(all_finite(got));
    double worst = 0;
    int64_t worst_at = -1;
    for (int64_t t = 0; t < T; ++t)
        for (int64_t n = 0; n < N; ++n) {
            double sum = 0, mag = 0;
            for (int64_t k = 0; k < K; ++k) {
                const double p = double(as_half(w[size_t(n * K + k)])) * as_half(x[size_t(t * K + k)]);
                sum += p;
                mag += std::fabs(p);
            }
            const size_t i = size_t(t * N + n);
            const double err = std::fabs(got[i] - sum) / std::max(mag, 1e-30);
            if (err > worst) worst = err, worst_at = int64_t(i);
        }
    INFO("worst normalised error against the binary16 product " << worst << " at output " << worst_at);
    REQUIRE(worst <= tol);
}

}  // namespace

TEST_CASE("the prefill matmul on matrix units computes the product of binary16 operands, every weight type",
          "[vulkan][coopmat]") {
    for (const char* mode : coopmat_modes()) {
        INFO("STRATA_VK_COOPMAT=" << mode);
        const ScopedEnv coopmat("STRATA_VK_COOPMAT", mode);
        const ScopedEnv tiled("STRATA_VK_TILED_FROM", "2");  // every prompt here on the tiled kernel
        auto cpu = make_cpu();
        auto gpu = make_vulkan();
        REQUIRE(gpu->info().kernels.find(std::string(mode) == "emulated" ? "emulated" : "matrix units") !=
                std::string::npos);
        struct Case {
            int64_t N, K, T, x_offset;
        };
        for (DType type : kAllTypes) {
            const int64_t unit = dtype_is_block(type) ? dtype_block_size(type) : 1;
            std::vector<Case> cases{
                // Two tiles of 64 tokens and 128 rows, both partial; several slices of 32; 16-byte loads.
                {136, unit == 256 ? 256 : 96, 70, 0},
                // x not on a 16-byte boundary (its single loads), a partial tile of a few tokens.
                {37, unit == 256 ? 256 : 64, 5, 3},
            };
            if (unit == 1) {
                cases.push_back({37, 20, 9, 0});  // depth 20: a partial slice; 16-bit weights in single pairs
                cases.push_back({19, 13, 66, 1});  // odd depth: the last pair's second half is past the row
            }
            for (const Case& c : cases) {
                INFO(dtype_name(type) << " w [" << c.N << ", " << c.K << "], T = " << c.T << ", x offset "
                                      << c.x_offset);
                Filler f;
                const std::vector<float> xv = random_floats(c.T * c.K, 91 + uint64_t(c.K));
                const int32_t ix = f.add(xv);
                auto w = weights(type, c.N, c.K, 92 + uint64_t(c.N));
                const std::vector<float> wv = dequantized(w->view);
                const std::vector<float> got = run_matmul(*gpu, f.model(), f, ix, w->view, c.T, c.x_offset);
                require_half_product(got, wv, xv, c.N, c.K, c.T, 2e-6 * std::sqrt(double(c.K)) + 1e-6);
                // Against the CPU backend's float32 product: each term off by at most binary16's rounding of
                // both factors (2^-11 each).
                const std::vector<float> want = run_matmul(*cpu, f.model(), f, ix, w->view, c.T, c.x_offset);
                require_close_terms(got, want, wv, xv, c.N, c.K, c.T, 0x1p-10 + 1e-6 * std::sqrt(double(c.K)));
            }
        }
        // Values beyond binary16's range are clamped to +-65504 (not infinities): in x and in float32 weights.
        {
            const int64_t N = 20, K = 40, T = 12;
            std::vector<float> xv = random_floats(T * K, 93), wv = random_floats(N * K, 94, 0.1f);
            xv[3] = 7e4f, xv[50] = -1e6f, xv[77] = 3e38f;
            wv[5] = 1e5f, wv[401] = -65520.0f;
            Filler f;
            const int32_t ix = f.add(xv);
            auto w = make_tensor("w", DType::F32, {N, K}, wv);
            const std::vector<float> got = run_matmul(*gpu, f.model(), f, ix, w->view, T, 0);
            require_half_product(got, wv, xv, N, K, T, 2e-6 * std::sqrt(double(K)) + 1e-6);
        }
    }
    require_no_validation_messages();
}

TEST_CASE("the backend says which prefill matmul it runs: float32 tiles unless matrix units are asked for",
          "[vulkan][coopmat]") {
    const bool units = coopmat_modes().size() > 1;
    bool cpu_device = false;
    for (const VulkanDeviceInfo& d : list_vulkan_devices()) cpu_device = cpu_device || (d.chosen && d.type == "cpu");
    BackendOptions fast = vulkan_options();
    fast.exact = false;
    // Float32 products on both paths (on the one GPU measured they were also the faster), in 8 x 8 per invocation
    // on a CPU device (lavapipe); a device with matrix units says how to ask for them.
    const std::string tiles =
        std::string("prefill matmul: float32 FMA tiles") + (cpu_device ? " (8 x 8 per invocation)" : "");
    const std::string offered = units ? tiles + "; matrix units on request (STRATA_VK_COOPMAT=1)" : tiles;
    CHECK(make_vulkan()->info().kernels == offered);
    CHECK(make_backend(fast)->info().kernels == offered);
    {
        const ScopedEnv on("STRATA_VK_COOPMAT", "1");
        const std::string asked = make_backend(fast)->info().kernels;
        INFO(asked);
        CHECK(asked.find(units ? "on matrix units" : "float32 FMA tiles") != std::string::npos);
    }
    {
        const ScopedEnv off("STRATA_VK_COOPMAT", "0");
        CHECK(make_backend(fast)->info().kernels == offered);
    }
    {
        const ScopedEnv emulated("STRATA_VK_COOPMAT", "emulated");
        CHECK(make_vulkan()->info().kernels ==
              "prefill matmul: the cooperative-matrix kernel emulated (binary16 operands, float32 FMAs)");
    }
    require_no_validation_messages();
}

TEST_CASE("a model's prompt through the binary16 prefill stays within the golden tolerance",
          "[vulkan][coopmat][model][golden]") {
    // What rounding x and w to binary16 in every product of a prompt changes: the golden model's short prompt
    // against Meta's float64 logits, with the same greedy next token as the float32 kernel.
    const auto model = load_model(golden_hf_dir());
    const std::vector<int32_t> tokens = expected()["prompts"]["short"]["tokens"].get<std::vector<int32_t>>();
    const NpyArray ref = read_npy(reference_dir() / "short" / "logits.npy");  // [T, vocab], Meta's float64
    const ScopedEnv tiled("STRATA_VK_TILED_FROM", "2");
    for (const char* mode : coopmat_modes()) {
        INFO("STRATA_VK_COOPMAT=" << mode);
        const ScopedEnv coopmat("STRATA_VK_COOPMAT", mode);
        auto b = make_vulkan();
        b->load(*model);
        KVCache cache(*b, model->config, 64);
        Transformer tf(*model, *b);
        TraceRequest all;
        all.logits_all_positions = true;
        all.keep_logits = true;
        const Trace trace = tf.prefill(cache, tokens, all);
        const std::vector<float>& got = trace.find("logits")->data;
        REQUIRE(got.size() == ref.data.size());
        REQUIRE(all_finite(got));
        const double err = rel_l2(got, ref.data);
        INFO("logits against the reference: relative L2 " << err);
        WARN("binary16 prefill (" << mode << "): golden short prompt logits rel. L2 " << err);
        CHECK(err < 5e-3);  // expected.json "tolerance", as the float32 kernel's tests
        const int64_t vocab = model->config.vocab_size;
        for (size_t t = 0; t < tokens.size(); ++t) {
            const auto row = got.begin() + std::ptrdiff_t(t) * vocab;
            const auto ref_row = ref.data.begin() + std::ptrdiff_t(t) * vocab;
            CHECK(std::max_element(row, row + vocab) - row == std::max_element(ref_row, ref_row + vocab) - ref_row);
        }
    }
    require_no_validation_messages();
}
