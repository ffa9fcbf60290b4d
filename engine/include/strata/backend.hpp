#pragma once
// The small op set the forward pass is written over. Backends supply the ops:
//   cpu    - the reference: plain, multithreaded, float32 math (engine/src/cpu)
//   vulkan - the fast one: GLSL compute shaders (engine/src/vulkan)
//
// Execution model: ops are *recorded* between begin() and submit(). The CPU backend runs each op as it is
// called; the Vulkan backend records the whole step into one command buffer and runs it at submit().
// Results read back with readback() are valid after submit() returns.
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/model.hpp"
#include "strata/tensor.hpp"

namespace strata {

// A float32 activation buffer owned by the backend, or a range of one: elements [offset, offset + count).
struct Buf {
    uint32_t id = UINT32_MAX;
    int64_t offset = 0;  // in floats
    int64_t count = 0;   // in floats
    bool valid() const { return id != UINT32_MAX; }
    Buf at(int64_t off, int64_t n) const { return Buf{id, offset + off, n}; }
};

// A pending device-to-host copy, fetched after submit().
struct Readback {
    uint32_t id = UINT32_MAX;
};

struct TokenScore {
    int32_t id = 0;
    float logit = 0.0f;
};

struct BackendInfo {
    std::string backend;       // "cpu" or "vulkan"
    std::string device;        // "AMD Ryzen ... (16 threads)" / "NVIDIA H200" / "llvmpipe (LLVM 15.0.6, 256 bits)"
    std::string device_type;   // "cpu", "discrete", "integrated", "virtual", "cpu (lavapipe)"
    std::string driver;        // driver name and version where known
    // The kernels the matrix products use: CPU "avx-vnni, integer-dot" / "avx2, exact float32" (the instruction
    // set chosen at run time, and whether block types take the integer-dot path); empty where it does not apply.
    std::string kernels;
};

class Backend {
public:
    virtual ~Backend() = default;
    virtual BackendInfo info() const = 0;

    // Binds (CPU) or uploads (Vulkan) every weight of `model` and precomputes freqs_cis for RoPE
    // (theta, Llama 3.1 scaling or GGUF rope_freqs). The model must outlive the backend.
    virtual void load(const Model& model, const LoadProgress& progress = {}) = 0;

    // A zero-initialised float32 buffer of n elements (activations, KV cache, scratch).
    virtual Buf alloc(int64_t n, std::string_view debug_name) = 0;
    // Bytes that buffers may still take before the machine runs out: the host's available memory (CPU), the
    // device-local heap (Vulkan). Requests beyond it are refused with a message instead of being attempted.
    virtual uint64_t memory_available() const = 0;
    virtual void free(Buf b) = 0;

    virtual void begin() = 0;   // start recording a step
    virtual void submit() = 0;  // run what was recorded and wait for it
    // As submit(), but the wait for the device gives up with Cancelled once *cancel is true (the device finishes
    // the work before the next begin()). The default runs submit(): the CPU backend computes while recording.
    virtual void submit(const std::atomic<bool>* cancel) {
        (void)cancel;
        submit();
    }

    // ---- ops (recorded) ----
    // out[t, :] = tok_embeddings[tokens[t], :]                           out: [T, dim]
    virtual void embed(Buf out, std::span<const int32_t> tokens) = 0;
    // out[t, :] = x[t, :] / sqrt(mean(x[t, :]^2) + eps) * weight          x, out: [T, n]; weight: [n]
    virtual void rmsnorm(Buf out, Buf x, const TensorView& weight, int64_t T, float eps) = 0;
    // out[t, :] = w @ x[t, :]   (x @ w^T)                                x: [T, in]; w: [out, in]; out: [T, out]
    // T == 1 is decode (matrix-vector), T > 1 is prefill (matrix-matrix).
    virtual void matmul(Buf out, Buf x, const TensorView& w, int64_t T) = 0;
    // out[t, :] += w @ x[t, :]: a product added into the residual stream (wo, w2). A backend that fuses the add
    // into the product overrides it; the default computes the product into scratch ([T, out]) and adds it, so
    // the result is the same either way (one float32 add of the same sum).
    virtual void matmul_add(Buf out, Buf x, const TensorView& w, int64_t T, Buf scratch);
    // matmul_add, then norm_out = rmsnorm(out, norm_weight, eps) of its T rows: wo's or w2's residual add and the
    // RMSNorm that reads its result (ffn_norm, the next block's attention_norm, the final norm), as one op where a
    // backend fuses them. The default runs the two, so the results are the same either way.
    virtual void matmul_add_rmsnorm(Buf out, Buf x, const TensorView& w, int64_t T, Buf scratch, Buf norm_out,
                                    const TensorView& norm_weight, float eps);
    // out[t, :] = silu(w1 @ x[t, :]) * (w3 @ x[t, :]): FeedForward's gate from its two products. A backend that
    // computes both products in one pass and applies the gate there overrides it; the default computes them into
    // a_scratch and b_scratch ([T, hidden_dim] each) and runs swiglu, so the result is the same either way.
    virtual void matmul_swiglu(Buf out, Buf x, const TensorView& w1, const TensorView& w3, int64_t T, Buf a_scratch,
                               Buf b_scratch);
    // out[t, :] = rope(w @ x[t, :]) at positions pos0 .. pos0+T-1: a q or k projection with the rotary embedding
    // applied as its epilogue (n_heads heads of head_dim in a row). The default is matmul, then rope in place.
    virtual void matmul_rope(Buf out, Buf x, const TensorView& w, int64_t T, int64_t n_heads, int64_t pos0);
    // Attention's three projections of the same x: matmul_rope(q_out, x, wq, T, n_heads, pos0), matmul_rope(k_out,
    // x, wk, T, n_kv_heads, pos0) and matmul(v_out, x, wv, T), as one op where a backend fuses them (one pass over
    // the three matrices). The default runs the three, so the results are the same either way.
    virtual void matmul_qkv(Buf q_out, Buf k_out, Buf v_out, Buf x, const TensorView& wq, const TensorView& wk,
                            const TensorView& wv, int64_t T, int64_t n_heads, int64_t n_kv_heads, int64_t pos0);
    // Rotates interleaved pairs (Meta layout) of each head at positions pos0 .. pos0+T-1 by freqs_cis.
    // x: [T, n_heads * head_dim], in place.
    virtual void rope(Buf x, int64_t T, int64_t n_heads, int64_t pos0) = 0;
    // Causal grouped-query attention of T new queries at positions pos0.. over cache rows [0, pos0+T).
    // q: [T, n_heads*head_dim]; k_cache, v_cache: [max_seq, n_kv_heads*head_dim] (already holding the new rows);
    // out: [T, n_heads*head_dim]. When probs is valid it receives softmax probabilities [n_heads, T, pos0+T].
    virtual void attention(Buf out, Buf q, Buf k_cache, Buf v_cache, int64_t T, int64_t pos0, Buf probs) = 0;
    // A KV cache in binary16 (KVCache with KvCacheType::F16): two values to each 32-bit word of an ordinary buffer
    // (element 2i of the cache in word i's low half, 2i + 1 in its high half; Buf offsets and counts in words).
    // dst[0 .. n/2) = src[0 .. n) so packed, rounded to nearest (ties to even); NaN and infinities stay what they
    // are, a finite value beyond binary16's range becomes +-65504. n even. The default throws UnsupportedError.
    virtual void store_f16(Buf dst, Buf src, int64_t n);
    // attention() over caches in binary16 (k_cache, v_cache: [max_seq, n_kv_heads*head_dim / 2] words, packed by
    // store_f16), with the values widened exactly. The default throws UnsupportedError.
    virtual void attention_f16(Buf out, Buf q, Buf k_cache, Buf v_cache, int64_t T, int64_t pos0, Buf probs);
    // store_f16(out, the product of w and x[t, :] for T tokens, rotated as matmul_rope when rope_heads > 0): the
    // new keys (with RoPE) or values of a binary16 cache in one op where a backend fuses the rounding into the
    // product. The default computes it into scratch ([T, w.rows()]) and stores it, so the result is the same.
    virtual void matmul_store_f16(Buf out, Buf x, const TensorView& w, int64_t T, int64_t rope_heads, int64_t pos0,
                                  Buf scratch);
    // matmul_qkv for a binary16 cache: matmul_rope(q_out, x, wq, T, n_heads, pos0), matmul_store_f16(k_out, x, wk,
    // T, n_kv_heads, pos0, k_scratch) and matmul_store_f16(v_out, x, wv, T, 0, pos0, v_scratch), as one op where a
    // backend fuses them. The default runs the three, so the results are the same either way.
    virtual void matmul_qkv_f16(Buf q_out, Buf k_out, Buf v_out, Buf x, const TensorView& wq, const TensorView& wk,
                                const TensorView& wv, int64_t T, int64_t n_heads, int64_t n_kv_heads, int64_t pos0,
                                Buf k_scratch, Buf v_scratch);
    // Makes ready what store_f16 and attention_f16 run for the loaded model (the Vulkan backend's pipelines), so
    // that no timed step builds them; a KVCache in binary16 calls it. Does nothing before load() or by default.
    virtual void prepare_f16_kv() {}
    // out = silu(a) * b, elementwise over n                              (SwiGLU: silu(w1 x) * (w3 x))
    virtual void swiglu(Buf out, Buf a, Buf b, int64_t n) = 0;
    // out = a + b, elementwise over n (out may alias a)
    virtual void add(Buf out, Buf a, Buf b, int64_t n) = 0;
    // dst[0..n) = src[0..n)
    virtual void copy(Buf dst, Buf src, int64_t n) = 0;
    // The k largest of row[0..n) (descending by value, ties by lower id), fetched with topk_result().
    virtual Readback topk(Buf row, int64_t n, int64_t k) = 0;
    // A copy of src[0..n) to the host, fetched after submit().
    virtual Readback readback(Buf src, int64_t n) = 0;
    // dst[0..src.size()) = src, host to backend (op tests, injected activations). Recorded in order with the
    // other ops; `src` is copied when the call returns. The default throws UnsupportedError.
    virtual void write(Buf dst, std::span<const float> src);

    // ---- results (after submit) ----
    virtual std::vector<float> fetch(Readback r) = 0;
    virtual std::vector<TokenScore> topk_result(Readback r) = 0;
};

// "cpu" or "vulkan"; device_index < 0 picks the best device. Throws DeviceError / UnsupportedError.
struct BackendOptions {
    std::string name = "cpu";
    int device_index = -1;
    int threads = 0;           // CPU: 0 = hardware concurrency
    // CPU: true keeps every product in float32 with the weights widened exactly (the reference path: the explorer
    // and the tests). false lets block-type weights (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K) take the integer-dot path:
    // activations quantized to 8 bits per block of 32 (strata/quant.hpp), faster, with a small error
    // (docs/performance.md). F32/F16/BF16 weights are exact either way. Vulkan: no difference (its prompts run on
    // matrix units only by STRATA_VK_COOPMAT=1).
    bool exact = true;
    // CPU: the instruction set of the kernels, as cpu_isa_name writes it ("" = the best this CPU has). One the
    // CPU lacks is refused with UnsupportedError (tests and measurements force the lesser ones).
    std::string cpu_isa;
    bool validation = false;   // Vulkan: enable VK_LAYER_KHRONOS_validation (also by STRATA_VK_VALIDATION=1)
    uint64_t max_binding_range = 0;  // Vulkan tests: force a smaller maxStorageBufferRange (0 = device's)
    uint64_t device_local_limit = 0;  // Vulkan tests: pretend device-local memory holds only this (0 = its heap)
};
std::unique_ptr<Backend> make_backend(const BackendOptions& options);

// The CPU backend's copy of the weight matrices (made at load on the fast path, exact = false, where memory
// allows; STRATA_CPU_HUGE_PAGES=0 reads them where they are mapped): its bytes, how many of them the kernel
// backs with huge pages, and how many hold rows stored in groups for decode (quant::decode_group). Zeros for
// another backend.
struct CpuWeightMemory {
    uint64_t resident_bytes = 0;
    uint64_t huge_page_bytes = 0;
    uint64_t grouped_bytes = 0;
};
CpuWeightMemory cpu_weight_memory(const Backend& backend);

// freqs_cis as model.py computes it (with Llama 3.1 apply_scaling, or GGUF rope_freqs factors):
// the angle frequency of pair i is freqs[i], i in [0, head_dim/2). Position p rotates pair i by p * freqs[i].
std::vector<double> rope_frequencies(const ModelConfig& config, std::span<const float> gguf_factors = {});

}  // namespace strata
