#pragma once
// The CPU reference backend: float32 activations in std::vector<float> buffers, weights read in place from the
// memory-mapped checkpoint and widened row by row, work split over a persistent thread pool (output rows for
// matmul, (head, query) pairs for attention). Ops run as they are called; begin()/submit() only mark a step.
// With BackendOptions::exact false, block-type weights take the integer-dot path (activations quantized to 8 bits
// once per matmul, quant::dot_q8_matrix); kernels for the instruction set chosen at construction (CpuIsa).
#include <initializer_list>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "cpu/kernels.hpp"
#include "cpu/thread_pool.hpp"
#include "strata/backend.hpp"
#include "strata/cpu_isa.hpp"
#include "strata/host_memory.hpp"
#include "strata/quant.hpp"

namespace strata::cpu {

class CpuBackend final : public Backend {
public:
    explicit CpuBackend(const BackendOptions& options);

    BackendInfo info() const override;
    void load(const Model& model, const LoadProgress& progress) override;
    Buf alloc(int64_t n, std::string_view debug_name) override;
    uint64_t memory_available() const override;
    void free(Buf b) override;
    void begin() override;
    void submit() override {}

    void embed(Buf out, std::span<const int32_t> tokens) override;
    void rmsnorm(Buf out, Buf x, const TensorView& weight, int64_t T, float eps) override;
    void matmul(Buf out, Buf x, const TensorView& w, int64_t T) override;
    // Fused where the matrices take the same path (below) and it is not the prefill tiles: x prepared once and
    // the products as one job of the pool; the same values, bit for bit, as Backend's defaults, which run
    // otherwise.
    void matmul_qkv(Buf q_out, Buf k_out, Buf v_out, Buf x, const TensorView& wq, const TensorView& wk,
                    const TensorView& wv, int64_t T, int64_t n_heads, int64_t n_kv_heads, int64_t pos0) override;
    void matmul_swiglu(Buf out, Buf x, const TensorView& w1, const TensorView& w3, int64_t T, Buf a_scratch,
                       Buf b_scratch) override;
    void rope(Buf x, int64_t T, int64_t n_heads, int64_t pos0) override;
    void attention(Buf out, Buf q, Buf k_cache, Buf v_cache, int64_t T, int64_t pos0, Buf probs) override;
    void store_f16(Buf dst, Buf src, int64_t n) override;
    void attention_f16(Buf out, Buf q, Buf k_cache, Buf v_cache, int64_t T, int64_t pos0, Buf probs) override;
    void swiglu(Buf out, Buf a, Buf b, int64_t n) override;
    void add(Buf out, Buf a, Buf b, int64_t n) override;
    void copy(Buf dst, Buf src, int64_t n) override;
    Readback topk(Buf row, int64_t n, int64_t k) override;
    Readback readback(Buf src, int64_t n) override;
    void write(Buf dst, std::span<const float> src) override;

    std::vector<float> fetch(Readback r) override;
    std::vector<TokenScore> topk_result(Readback r) override;

    // The copy of the weight matrices made at load (strata/backend.hpp, cpu_weight_memory).
    CpuWeightMemory weight_memory() const {
        return {resident_memory_.size(), resident_memory_.huge_bytes(), grouped_bytes_};
    }

private:
    // The floats [b.offset, b.offset + n) of buffer b, or an Error naming the op when they are not all there.
    float* span_of(Buf b, int64_t n, const char* op);
    const ModelConfig& config(const char* op) const;
    // attention() over the cache rows at keys and values ([pos0 + T, kv_dim] each, float32 or binary16).
    void attend(Buf out, Buf q, const KvHead& keys, const KvHead& values, int64_t T, int64_t pos0, Buf probs);

    // How a product's rows are computed, and what is made of x first: the integer-dot path (x quantized once
    // into act_), F16 decode with x in binary16 (xh_), decode on float32 x (matvec), or prefill's widened row
    // blocks (matmul_rows).
    enum class Path { IntegerDot, HalfX, Matvec, Tiles };
    Path path_of(const TensorView& w, int64_t T) const;
    // Prepares x ([T, cols]) for path p and returns the path taken: HalfX becomes Matvec where x holds Inf or NaN.
    Path prepare(Path p, const float* xs, int64_t T, int64_t cols);
    // Rows [r0, r1) of w's product on a prepared path other than Tiles.                      out: [T, rows of w]
    void product_rows(Path p, const TensorView& w, const float* xs, int64_t T, float* out, int64_t r0, int64_t r1);
    // The path all of ws (resident views) take when one preparation of x serves them as one job: the same path,
    // not Tiles, the same cols and rows in whole units of the pool's grain (so each matrix is cut as on its own).
    std::optional<Path> shared_path(std::initializer_list<const TensorView*> ws, int64_t T) const;
    // A product's output must not be its input buffer (rows are written while x is still read).
    static void check_not_input(Buf out, Buf x, const TensorView& w);

    ThreadPool pool_;
    CpuIsa isa_;        // the integer-dot kernels' (int_isa below picks a product's)
    CpuIsa float_isa_;  // the float kernels' (isa_, or Avx2 where 512-bit float vectors do not pay)
    // A block type's integer-dot kernels for T tokens: isa_'s, except that where 512-bit vectors do not pay
    // (float_isa_ != isa_) a prefill (T > 1) of Q4_K or Q5_K takes the 256-bit vpdpbusd ones (CpuIsa::AvxVnni).
    // On AMD Zen 4 that made 8B Q4_K_M prefill 1.12x and 1B Q5_K_M's 1.10-1.17x, while the same kernels made
    // 8B Q4_K_M decode 0.96x, so decode keeps the 512-bit ones (docs/performance.md).
    CpuIsa int_isa(DType t, int64_t T) const {
        return float_isa_ != isa_ && T > 1 && (t == DType::Q4_K || t == DType::Q5_K) ? CpuIsa::AvxVnni : isa_;
    }
    bool exact_;
    quant::Q8Activations act_;  // the quantized activations of the current matmul (integer-dot path)
    std::vector<uint16_t> xh_;  // x in binary16 for the current F16 decode matmul (fast path)
    float xh_scale_ = 0;        // and the scale it was taken at (half_activations)
    const Model* model_ = nullptr;
    // The matrices the products read (every 2-D weight but the embedding table, which is only gathered from,
    // unless it is the output too), copied at load into memory of the backend's own with huge pages asked for
    // (strata/host_memory.hpp): decode streams them, and a file mapping's 4 KiB pages cost it. On the fast path
    // only. Keyed by the mapped bytes; a weight not found (exact path, no memory to spare,
    // STRATA_CPU_HUGE_PAGES=0) is read where it is mapped.
    HugePageBuffer resident_memory_;
    std::unordered_map<const std::byte*, TensorView> resident_;
    // The copies whose rows are stored in groups (quant::interleave_rows), by their bytes: the group.
    std::unordered_map<const std::byte*, int> groups_;
    uint64_t grouped_bytes_ = 0;  // their bytes
    void make_resident(const Model& model, const std::atomic<bool>* cancel);
    // What a product over T tokens reads of w: its copy, except that a prompt reads rows stored in groups where
    // they are mapped, in their order. Groups serve decode; read by a prefill, each group's rows were copied back
    // for every tile of tokens (4096 x 14336 Q4_K / Q6_K, 64 tokens: 0.93x), and a prompt's products, bound by
    // arithmetic, lose nothing measurable to the mapping's pages (docs/performance.md).
    const TensorView& resident(const TensorView& w, int64_t T) const {
        const auto it = resident_.find(w.data);
        if (it == resident_.end() || (T > 1 && groups_.count(it->second.data))) return w;
        return it->second;
    }

    std::vector<double> freqs_;  // [head_dim / 2] RoPE angle per position for each pair
    std::vector<CacheLineVector<float>> buffers_;
    std::vector<bool> live_;
    std::vector<uint32_t> free_ids_;
    // Results of the current step, by Readback id: a copy (readback) or a top-k list (topk).
    struct Result {
        bool is_topk = false;
        std::vector<float> data;
        std::vector<TokenScore> top;
    };
    std::vector<Result> results_;
};

}  // namespace strata::cpu
