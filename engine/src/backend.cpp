// Choosing a backend, and the RoPE frequencies every backend shares.
#include "strata/backend.hpp"

#include <cmath>
#include <numbers>
#include <string>

#include "cpu/cpu_backend.hpp"
#include "strata/error.hpp"
#ifdef STRATA_HAVE_VULKAN
#include "vulkan/vulkan_backend_factory.hpp"
#endif

namespace strata {

void Backend::write(Buf, std::span<const float>) {
    throw UnsupportedError("backend '" + info().backend + "' cannot write host data into its buffers");
}

void Backend::matmul_add(Buf out, Buf x, const TensorView& w, int64_t T, Buf scratch) {
    matmul(scratch, x, w, T);
    add(out, out, scratch, T * w.rows());
}

void Backend::matmul_add_rmsnorm(Buf out, Buf x, const TensorView& w, int64_t T, Buf scratch, Buf norm_out,
                                 const TensorView& norm_weight, float eps) {
    matmul_add(out, x, w, T, scratch);
    rmsnorm(norm_out, out, norm_weight, T, eps);
}

void Backend::matmul_swiglu(Buf out, Buf x, const TensorView& w1, const TensorView& w3, int64_t T, Buf a_scratch,
                            Buf b_scratch) {
    matmul(a_scratch, x, w1, T);
    matmul(b_scratch, x, w3, T);
    swiglu(out, a_scratch, b_scratch, T * w1.rows());
}

void Backend::matmul_rope(Buf out, Buf x, const TensorView& w, int64_t T, int64_t n_heads, int64_t pos0) {
    matmul(out, x, w, T);
    rope(out, T, n_heads, pos0);
}

void Backend::matmul_qkv(Buf q_out, Buf k_out, Buf v_out, Buf x, const TensorView& wq, const TensorView& wk,
                         const TensorView& wv, int64_t T, int64_t n_heads, int64_t n_kv_heads, int64_t pos0) {
    matmul_rope(q_out, x, wq, T, n_heads, pos0);
    matmul_rope(k_out, x, wk, T, n_kv_heads, pos0);
    matmul(v_out, x, wv, T);
}

void Backend::store_f16(Buf, Buf, int64_t) {
    throw UnsupportedError("backend '" + info().backend + "' has no binary16 KV cache");
}

void Backend::matmul_store_f16(Buf out, Buf x, const TensorView& w, int64_t T, int64_t rope_heads, int64_t pos0,
                               Buf scratch) {
    if (rope_heads > 0) matmul_rope(scratch, x, w, T, rope_heads, pos0);
    else matmul(scratch, x, w, T);
    store_f16(out, scratch, T * w.rows());
}

void Backend::matmul_qkv_f16(Buf q_out, Buf k_out, Buf v_out, Buf x, const TensorView& wq, const TensorView& wk,
                             const TensorView& wv, int64_t T, int64_t n_heads, int64_t n_kv_heads, int64_t pos0,
                             Buf k_scratch, Buf v_scratch) {
    matmul_rope(q_out, x, wq, T, n_heads, pos0);
    matmul_store_f16(k_out, x, wk, T, n_kv_heads, pos0, k_scratch);
    matmul_store_f16(v_out, x, wv, T, 0, pos0, v_scratch);
}

void Backend::attention_f16(Buf, Buf, Buf, Buf, int64_t, int64_t, Buf) {
    throw UnsupportedError("backend '" + info().backend + "' has no binary16 KV cache");
}

std::unique_ptr<Backend> make_backend(const BackendOptions& options) {
    if (options.name == "cpu") return std::make_unique<cpu::CpuBackend>(options);
    if (options.name == "vulkan") {
#ifdef STRATA_HAVE_VULKAN
        return make_vulkan_backend(options);
#else
        throw UnsupportedError("this build of Strata has no Vulkan backend (configured with STRATA_BUILD_VULKAN=OFF)");
#endif
    }
    throw UnsupportedError("unknown backend '" + options.name + "' (expected cpu or vulkan)");
}

CpuWeightMemory cpu_weight_memory(const Backend& backend) {
    const auto* cpu = dynamic_cast<const cpu::CpuBackend*>(&backend);
    return cpu ? cpu->weight_memory() : CpuWeightMemory{};
}

std::vector<double> rope_frequencies(const ModelConfig& config, std::span<const float> gguf_factors) {
    if (config.head_dim <= 0 || config.head_dim % 2 != 0)
        throw ModelError("RoPE needs an even head_dim, got " + std::to_string(config.head_dim));
    const int64_t half = config.head_dim / 2;
    if (!gguf_factors.empty() && static_cast<int64_t>(gguf_factors.size()) != half)
        throw ModelError("rope_freqs has " + std::to_string(gguf_factors.size()) + " factors, expected head_dim/2 = " +
                         std::to_string(half));
    // model.py, precompute_freqs_cis: freqs = 1 / theta^(2i / head_dim), here in double.
    std::vector<double> freqs(static_cast<size_t>(half));
    for (int64_t i = 0; i < half; ++i)
        freqs[static_cast<size_t>(i)] =
            1.0 / std::pow(double(config.rope_theta), double(2 * i) / double(config.head_dim));

    if (!gguf_factors.empty()) {
        // GGUF stores Llama 3.1's scaling already worked out, as one divisor per frequency.
        for (int64_t i = 0; i < half; ++i) freqs[static_cast<size_t>(i)] /= double(gguf_factors[static_cast<size_t>(i)]);
        return freqs;
    }
    const RopeScaling& s = config.rope_scaling;
    if (!s.enabled) return freqs;
    // Llama 3.1 apply_scaling (meta-llama/llama-models): wavelengths longer than the original context / low
    // factor are slowed by `factor`, shorter than original context / high factor are kept, and the band in
    // between blends the two smoothly.
    const double old_context_len = double(s.original_max_position_embeddings);
    const double low_freq_wavelen = old_context_len / double(s.low_freq_factor);
    const double high_freq_wavelen = old_context_len / double(s.high_freq_factor);
    for (double& freq : freqs) {
        const double wavelen = 2.0 * std::numbers::pi / freq;
        if (wavelen < high_freq_wavelen) continue;
        if (wavelen > low_freq_wavelen) {
            freq = freq / double(s.factor);
        } else {
            const double smooth = (old_context_len / wavelen - double(s.low_freq_factor)) /
                                  (double(s.high_freq_factor) - double(s.low_freq_factor));
            freq = (1.0 - smooth) * freq / double(s.factor) + smooth * freq;
        }
    }
    return freqs;
}

}  // namespace strata
