#pragma once
// The forward pass, written once over the Backend ops, readable beside model.py.
#include <atomic>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "strata/backend.hpp"
#include "strata/model.hpp"
#include "strata/trace.hpp"

namespace strata {

// How a KV cache holds its keys and values: float32 (the default: the explorer shows true values), or binary16
// (half the memory and half the bytes attention reads; each new key and value is rounded once as it is stored).
enum class KvCacheType { F32, F16 };
std::string_view kv_cache_type_name(KvCacheType t);  // "f32" / "f16"

// Bytes of the KV cache for max_seq positions: 2 (k, v) x n_layers x max_seq x kv_dim values of 4 or 2 bytes.
uint64_t kv_cache_bytes(const ModelConfig& config, int64_t max_seq, KvCacheType type = KvCacheType::F32);

// Bytes of the activation buffers a step of T tokens after pos0 cached positions allocates on the backend under
// `request` (kept between steps): the residual stream and each block's intermediates, the logits rows it holds at
// once (every position's when the trace keeps "logits", else one piece of kLogitRowsPerPiece rows), and the
// attention probabilities when asked for.
uint64_t step_buffer_bytes(const ModelConfig& config, const TraceRequest& request, int64_t T, int64_t pos0 = 0);

// The KV cache of one sequence: per layer k and v, [max_seq, n_kv_heads * head_dim], on the backend.
class KVCache {
public:
    // F16 needs a backend with Backend::store_f16 and attention_f16 (both the CPU and the Vulkan backend have them).
    KVCache(Backend& backend, const ModelConfig& config, int64_t max_seq, KvCacheType type = KvCacheType::F32);
    ~KVCache();
    KVCache(const KVCache&) = delete;
    KVCache& operator=(const KVCache&) = delete;

    int64_t capacity() const { return max_seq_; }
    int64_t size() const { return size_; }       // positions filled
    void truncate(int64_t n);                    // forget positions >= n (regenerate, edit)
    KvCacheType type() const { return type_; }
    // Rows [first, first + n) of a layer's keys / values ([max_seq, n_kv_heads * head_dim] each), in the buffer's
    // units: floats, or (F16) 32-bit words of two binary16 values.
    Buf k_rows(int64_t layer, int64_t first, int64_t n) const { return k_[layer].at(first * row_, n * row_); }
    Buf v_rows(int64_t layer, int64_t first, int64_t n) const { return v_[layer].at(first * row_, n * row_); }

private:
    friend class Transformer;
    Backend* backend_;
    int64_t max_seq_;
    KvCacheType type_;
    int64_t row_;  // buffer elements per position: kv_dim, or kv_dim / 2 in binary16
    int64_t size_ = 0;
    std::vector<Buf> k_, v_;
};

class Transformer {
public:
    // The backend must already have load()ed the model.
    Transformer(const Model& model, Backend& backend);
    ~Transformer();

    // Prefill: all `tokens` at positions cache.size().. in one pass (matrix-matrix products).
    // Decode: one token at position cache.size() (matrix-vector products).
    // Both append to the cache and return the trace (always with last_logits and the requested top-k).
    // Throws InputError for an empty prompt, a token id >= vocab, or a sequence longer than the cache;
    // Cancelled when *cancel becomes true (checked between layers for prefill).
    Trace prefill(KVCache& cache, std::span<const int32_t> tokens, const TraceRequest& request,
                  const std::atomic<bool>* cancel = nullptr);
    Trace decode(KVCache& cache, int32_t token, const TraceRequest& request);

    // The residual rows [rows, dim] through the final norm and the output projection on the backend, as the
    // model's last two steps would (the logit lens: h.N read out as if block N were the last). [rows, vocab].
    // Throws InputError when the values are not whole rows of dim.
    std::vector<float> project(std::span<const float> residual, int64_t rows);

    const Model& model() const { return *model_; }
    Backend& backend() const { return *backend_; }

private:
    Trace step(KVCache& cache, std::span<const int32_t> tokens, const TraceRequest& request,
               const std::atomic<bool>* cancel);
    struct Scratch;
    const Model* model_;
    Backend* backend_;
    std::unique_ptr<Scratch> scratch_;
};

// Checks every weight for NaN/Inf (ModelError naming the first bad tensor and element).
void check_weights_finite(const Model& model);

}  // namespace strata
