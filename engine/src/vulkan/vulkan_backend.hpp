#pragma once
// The Vulkan backend: every op of a step is recorded into one command buffer (a Sequence) and run at submit().
//
// Buffers. A Buf id names a device-local float32 buffer (activations, KV cache) or an internal one (the RoPE
// table, top-k scratch). Shaders see a buffer through a binding that starts at an aligned offset and covers at
// most max_binding_range bytes; the op adds the remaining element offset. Ops whose data exceed one binding are
// split (by rows or elements) into several dispatches.
// Weights. Uploaded once into device-local memory (load(), or on first use for a tensor the model does not
// hold) through a bounded staging buffer, rows in canonical Meta order, in their stored type (GGUF block types as
// their raw blocks). A tensor bigger than one binding is split by rows into chunks, each its own buffer (whole
// rows, hence whole blocks); ops dispatch once per chunk.
// Hazards. Each dispatch or copy declares what it reads and writes; a barrier is recorded only when a buffer
// written since the last barrier is touched again, or one read since then is written (RAW, WAW, WAR).
// Results. readback() and topk() write into host-visible pages at their place in the step; fetch() and
// topk_result() read the pages after submit().
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "strata/backend.hpp"
#include "strata/vulkan.hpp"
#include "vulkan/context.hpp"
#include "vulkan/resources.hpp"

namespace strata::vk {

// A range of a buffer as one shader binding sees it: it starts at `offset` (aligned) and the shader adds
// `first` elements to reach the data. `track` is the buffer id used for hazard tracking (kUntracked for
// weights and host pages, which no dispatch writes after they are filled). offset and range are bytes.
// A binding of the whole buffer (set_range > 0) gives the descriptor [set_offset, set_offset + set_range) and
// `first` counts from there, while offset and range still name the bytes the op touches, for hazard tracking:
// the descriptor set is then the same whichever part an op touches (a KV cache's new row, its first L rows).
struct Binding {
    VkBuffer buffer = VK_NULL_HANDLE;
    uint64_t offset = 0;
    uint64_t range = 0;
    uint32_t first = 0;
    uint32_t track = UINT32_MAX;
    bool write = false;
    uint64_t set_offset = 0;
    uint64_t set_range = 0;
};
constexpr uint32_t kUntracked = UINT32_MAX;

// A weight on the device: its rows split into chunks that each fit one binding.
struct DeviceTensor {
    std::string name;
    DType dtype = DType::F32;
    int64_t rows = 0, cols = 0;
    uint64_t row_bytes = 0;
    struct Chunk {
        Buffer buffer;  // rows [row0, row0 + rows) in canonical order, packed
        int64_t row0 = 0, rows = 0;
    };
    std::vector<Chunk> chunks;
};

// A kernel with a single variant: its name, storage buffers and push-constant bytes.
struct KernelShape {
    const char* variant;
    uint32_t buffers;
    uint32_t push_bytes;
};

// The push constants of matmul.comp and matmul_coopmat.comp (ops.cpp records them; coopmat_check.cpp too).
struct MatmulPush {
    uint32_t T, rows, cols, x_first, o_first, o_stride, tiles_n;
};

// The name of a weight-reading shader's variant, as shaders/variants.cmake spells it: the form's parts, then the
// stored type in lower case ("matvec" "_vec" "_rope_qk" "_bf16"). Built in place: a decode step asks for one per
// dispatch. Block types are read from their GGUF blocks (shaders/quant.glsl).
class VariantName {
public:
    VariantName(std::initializer_list<std::string_view> parts, DType t);
    operator std::string_view() const { return {text_, size_}; }

private:
    void append(std::string_view s);
    char text_[48];
    size_t size_ = 0;
};

// Kernel shapes, chosen per device kind. A GPU wants wide workgroups; a CPU device (lavapipe) runs a workgroup
// as a loop over SIMD lanes where every barrier is a costly switch, so it gets one subgroup per workgroup and
// the weight-streaming kernel for prompts too. STRATA_VK_MATVEC="WG,ROWS" overrides the matvec shape (bench),
// STRATA_VK_TILED_FROM=T the prompt length from which the tiled matmul takes over (tests).
struct KernelTuning {
    uint32_t matvec_workgroup = 128;
    uint32_t matvec_rows = 2;       // output rows per workgroup
    int64_t matvec_max_tokens = 8;  // prompts up to this many tokens use matvec.comp, longer ones matmul.comp
    uint32_t topk_workgroup = 256;
    // rmsnorm.comp: one workgroup per token, so at decode one workgroup does the whole row; on a GPU the widest
    // the device allows (up to 1024: fewer dependent loads per invocation), 256 on a CPU device.
    // STRATA_VK_NORM_WG=N overrides it.
    uint32_t norm_workgroup = 256;
    // Decode (up to 4 queries) over at least this many keys splits the keys over several workgroups and merges
    // them (attention_combine.comp): enough splits for about attention_groups workgroups in all, each of at least
    // attention_split_keys keys. STRATA_VK_ATTN_SPLIT_FROM overrides the length (tests).
    int64_t attention_split_from = 128;
    int64_t attention_split_keys = 64;
    int64_t attention_groups = 256;
    // The query heads of one KV head in one workgroup (attention_grouped.comp) wherever no probabilities are
    // asked for; STRATA_VK_ATTN_GROUPED=0 runs attention.comp (a workgroup per query head) instead.
    bool attention_grouped = true;
    // Prompts of at least this many queries (no probabilities) run attention_flash.comp: up to 128 / lanes rows
    // per workgroup, each row's dims over `lanes` invocations of a subgroup (so at most attention_flash_lanes,
    // the device's subgroup size up to 8). 0: never (no subgroup shuffles). STRATA_VK_ATTN_FLASH_FROM=T[,LANES[,WG]]
    // overrides it (0 turns it off), the lanes' limit and the workgroup's invocations (attention_flash_wg: more
    // rows share each staged key and value block; the device's limit applies).
    int64_t attention_flash_from = 16;
    uint32_t attention_flash_lanes = 8;
    uint32_t attention_flash_wg = 128;
    // A step goes to the device in parts as it is recorded, so that the device starts early and recording
    // overlaps its work: the first part after submit_first dispatches, each next one after twice as many as the
    // last, up to submit_most. STRATA_VK_SUBMIT="FIRST,MOST" overrides them, "0" submits each step whole.
    int64_t submit_first = 8;
    int64_t submit_most = 64;
    // matvec.comp's epilogues (matmul_add, matmul_add_rmsnorm, matmul_swiglu, matmul_rope, matmul_qkv and
    // matmul_qkv_f16 fused). STRATA_VK_FUSE=0 turns them off: every op then runs as the interface's default, for
    // tests that compare both and for before/after counts.
    bool fuse = true;
    // Block types' bytes become floats through their float bits (quant.glsl's BYTE_FLOAT_BITS: an OR and a
    // subtraction, where a GPU converts integers at a fraction of its float rate) or by conversion (a CPU device,
    // where conversion is one instruction). The same floats either way. STRATA_VK_BYTE_FLOAT_BITS=0|1 overrides.
    bool byte_float_bits = true;
    // Block types in matvec.comp on a GPU (QUAD_LANES): neighbouring invocations read neighbouring bytes, a piece
    // of 32 weights each for Q4_K and Q6_K (16-byte x loads), a quad of 4 for the other types; on a CPU device
    // whole units per invocation (each lane pays for each scale it works out). The same products either way,
    // summed in another order. STRATA_VK_QUAD_LANES=0|1 overrides.
    bool matvec_quad_lanes = true;
    // Float types' 16-byte matvec loops (LOADS): the loads of this many iterations are issued before any is summed,
    // so that several loads per row are in flight (4 would load an 8B model's 4096-wide rows in one go at 128
    // invocations). The same bits for any value. 1 until a GPU has measured more (scripts/gpu-bench.sh's `loads`
    // phase): on lavapipe 2 and 4 made decode slower, and on the H200 4 rows per workgroup instead of 2 (twice the
    // loads in flight) gained nothing clear. STRATA_VK_MATVEC_LOADS=N (1-8) overrides.
    uint32_t matvec_loads = 1;
    // Where the prefill matmul runs: matmul.comp (float32 FMAs, the default: on the one GPU measured it was also
    // the faster), matmul_coopmat.comp on matrix units (binary16 operands, on a device with
    // VK_NV_cooperative_matrix, by STRATA_VK_COOPMAT=1; the kernel is checked on the device when the backend is
    // made, and not used if its result is wrong), or that kernel's emulated form (the same binary16 staging with
    // float32 FMAs, any device: tests; STRATA_VK_COOPMAT=emulated). STRATA_VK_COOPMAT=0 keeps matmul.comp.
    enum class Prefill { Float32, Coopmat, Emulated } prefill = Prefill::Float32;
    // matmul.comp's float32 tiles with 8 tokens x 8 rows per invocation (128 invocations, TILE8) instead of 4 x 8
    // (256), and two slices in shared memory (one barrier per slice; 25 KiB, so only where the device has that):
    // fewer shared-memory reads per product and half the barriers, the same bits. On for CPU devices (measured
    // there); off on GPUs until one has measured it (scripts/gpu-bench.sh's `tile8` phase).
    // STRATA_VK_MATMUL_TILE8=0|1 overrides.
    bool matmul_tile8 = false;
};

class VulkanBackend final : public Backend {
public:
    explicit VulkanBackend(const BackendOptions& options);
    ~VulkanBackend() override;

    BackendInfo info() const override;
    void load(const Model& model, const LoadProgress& progress) override;
    Buf alloc(int64_t n, std::string_view debug_name) override;
    uint64_t memory_available() const override { return ctx_->info().memory; }
    void free(Buf b) override;
    void begin() override;
    void submit() override { submit(nullptr); }
    void submit(const std::atomic<bool>* cancel) override;

    void embed(Buf out, std::span<const int32_t> tokens) override;
    void rmsnorm(Buf out, Buf x, const TensorView& weight, int64_t T, float eps) override;
    void matmul(Buf out, Buf x, const TensorView& w, int64_t T) override;
    // Fused into matvec.comp's epilogue (ACCUMULATE, NORM, SWIGLU, ROPE, QK, KV_F16) where the matvec kernel runs,
    // the interface's default (the product, then the elementwise op) elsewhere.
    void matmul_add(Buf out, Buf x, const TensorView& w, int64_t T, Buf scratch) override;
    void matmul_add_rmsnorm(Buf out, Buf x, const TensorView& w, int64_t T, Buf scratch, Buf norm_out,
                            const TensorView& norm_weight, float eps) override;
    void matmul_swiglu(Buf out, Buf x, const TensorView& w1, const TensorView& w3, int64_t T, Buf a_scratch,
                       Buf b_scratch) override;
    void matmul_rope(Buf out, Buf x, const TensorView& w, int64_t T, int64_t n_heads, int64_t pos0) override;
    void matmul_qkv(Buf q_out, Buf k_out, Buf v_out, Buf x, const TensorView& wq, const TensorView& wk,
                    const TensorView& wv, int64_t T, int64_t n_heads, int64_t n_kv_heads, int64_t pos0) override;
    void rope(Buf x, int64_t T, int64_t n_heads, int64_t pos0) override;
    void attention(Buf out, Buf q, Buf k_cache, Buf v_cache, int64_t T, int64_t pos0, Buf probs) override;
    void store_f16(Buf dst, Buf src, int64_t n) override;
    void attention_f16(Buf out, Buf q, Buf k_cache, Buf v_cache, int64_t T, int64_t pos0, Buf probs) override;
    void prepare_f16_kv() override;
    void matmul_store_f16(Buf out, Buf x, const TensorView& w, int64_t T, int64_t rope_heads, int64_t pos0,
                          Buf scratch) override;
    void matmul_qkv_f16(Buf q_out, Buf k_out, Buf v_out, Buf x, const TensorView& wq, const TensorView& wk,
                        const TensorView& wv, int64_t T, int64_t n_heads, int64_t n_kv_heads, int64_t pos0,
                        Buf k_scratch, Buf v_scratch) override;
    void swiglu(Buf out, Buf a, Buf b, int64_t n) override;
    void add(Buf out, Buf a, Buf b, int64_t n) override;
    void copy(Buf dst, Buf src, int64_t n) override;
    Readback topk(Buf row, int64_t n, int64_t k) override;
    Readback readback(Buf src, int64_t n) override;
    void write(Buf dst, std::span<const float> src) override;  // write.cpp

    std::vector<float> fetch(Readback r) override;
    std::vector<TokenScore> topk_result(Readback r) override;

    // Beyond the interface (strata/vulkan.hpp).
    VulkanBandwidth read_bandwidth(uint64_t bytes, int repeats);
    double last_step_gpu_ms() const { return last_step_ms_; }
    VulkanStepStats last_step_stats() const { return last_stats_; }
    std::string profile_report() const;
    Context& context() { return *ctx_; }
    size_t kernels_built() const { return kernels_.size(); }  // pipelines built so far (tests: none in a step)
    // The cooperative-matrix kernel (or its emulation) on an exactly representable product with partial tiles:
    // "" when the device's result is exact, else what differs (coopmat_check.cpp).
    std::string check_coopmat();

private:
    // ---- buffers (vulkan_backend.cpp)
    struct Slot {
        Buffer buffer;
        int64_t floats = 0;
        std::string name;
        bool live = false;
    };
    uint32_t new_slot(Buffer buffer, int64_t floats, std::string name);
    Slot& slot(Buf b, const char* op);
    // The binding for elements [b.offset + first, b.offset + first + count) of buffer b. With whole, the
    // descriptor covers the whole buffer where one binding can (the hazard range stays the elements'). Only for
    // an op's single dispatch: synchronization validation takes a descriptor's whole range as accessed, so two
    // dispatches between barriers writing disjoint parts of one buffer each need their own narrow range.
    Binding bind(Buf b, int64_t first, int64_t count, bool write, const char* op, bool whole = false);
    // The most elements one binding is sure to cover, whatever the start offset.
    int64_t max_binding_floats() const;
    // The RoPE cos/sin table for T positions from pos (after ensure_rope_table), half pairs each: the whole table
    // where one binding holds it, the position then in the push constants, so that the descriptor set is the same
    // from step to step; otherwise these positions' rows. `first`: the push constant that points at pos's pair 0.
    struct TableBinding {
        Binding binding;
        uint32_t first;
    };
    TableBinding bind_rope_table(int64_t pos, int64_t T, int64_t half, const char* op);
    Binding bind_weight(const DeviceTensor::Chunk& c) const;

    // ---- recording (vulkan_backend.cpp)
    // The pipeline for a variant with these specialization constants (built on first use). Looked up with no
    // allocation: it runs for every dispatch.
    const Kernel& kernel(std::string_view variant, uint32_t buffers, uint32_t push_bytes,
                         std::initializer_list<uint32_t> constants = {});
    // attention_flash.comp for the model: its specialization (lanes per row, dims per lane, keys per block) and the
    // queries per workgroup; lanes 0 where the tiles are off or do not take the model's shape.
    struct FlashShape {
        uint32_t lanes = 0, dims = 0, keys = 0;
        int64_t queries = 0;
        uint32_t wg = 0;  // invocations per workgroup
    };
    FlashShape flash_shape(const ModelConfig& c) const;
    const Kernel& flash_kernel(const FlashShape& s, bool kv_f16 = false);
    // attention() and attention_f16(): the caches in float32 or binary16 (kv.glsl).
    void attend(Buf out, Buf q, Buf k_cache, Buf v_cache, int64_t T, int64_t pos0, Buf probs, bool kv_f16);
    const Kernel& kernel(const KernelShape& s, std::initializer_list<uint32_t> constants = {}) {
        return kernel(s.variant, s.buffers, s.push_bytes, constants);
    }
    void require_recording(const char* op) const;
    // Records a barrier first when this access conflicts with one since the last barrier.
    void access(std::span<const Binding> bindings);
    void barrier();
    void dispatch(const Kernel& k, std::span<const Binding> bindings, const void* push, uint64_t groups);

    // Host-visible pages for the tokens of a step (Upload) and for results (Readback).
    struct HostSlice {
        size_t page = 0;
        uint64_t offset = 0;
    };
    struct HostArena {
        Memory memory = Memory::Upload;
        uint64_t page_bytes = 0;  // the usual page size; a bigger request gets a page of its own size
        std::vector<Buffer> pages;
        size_t page = 0;
        uint64_t used = 0;
    };
    HostSlice reserve(HostArena& arena, uint64_t bytes, const char* what);
    // A binding over a host slice (tokens read by embed, top-k results written by the last pass).
    Binding bind_host(const HostArena& arena, HostSlice s, uint64_t bytes, bool write) const;

    // ---- weights (weights.cpp)
    const DeviceTensor& device_tensor(const TensorView& w);
    void upload_tensors(const std::vector<const TensorView*>& tensors, const LoadProgress& progress);
    void ensure_rope_table(int64_t positions);

    // ---- ops helpers (ops.cpp)
    const ModelConfig& config(const char* op) const;
    // The kernels of the weight-reading ops, shared by the ops and prepare_kernels().
    // What matvec.comp does with its finished sums: store them, add them into out (wo, w2), gate two products
    // (w1 with w3), rotate pairs of rows (wq, wk).
    // StoreF16 / RopeF16: Store / Rope with the rows written in binary16 pairs (matmul_store_f16). RopeQk: Rope
    // over wq's and wk's rows in one dispatch; RopeQkv: the same and wv's rows stored (matmul_qkv); RopeQkF16,
    // RopeQkvF16: the same with k's and v's rows in binary16 pairs (matmul_qkv_f16). AddNorm: Add, then the
    // RMSNorm of the new rows by the last workgroup (matmul_add_rmsnorm).
    enum class Epilogue {
        Store, Add, Swiglu, Rope, StoreF16, RopeF16, RopeQk, RopeQkv, RopeQkF16, RopeQkvF16, AddNorm
    };
    uint32_t matvec_tokens(int64_t T, Epilogue e = Epilogue::Store) const;  // tokens per pass for a prompt of T
    static bool matvec_vec_form(const DeviceTensor& d);
    const Kernel& matvec_kernel(DType t, bool vec, uint32_t nt, Epilogue e = Epilogue::Store);
    // The weight-streaming product of matmul (T <= matvec_max_tokens) with its epilogue; w3 for Swiglu, pos0 for
    // Rope.
    void matvec(Buf out, Buf x, const DeviceTensor& d, int64_t T, Epilogue e, const DeviceTensor* w3 = nullptr,
                int64_t pos0 = 0);
    // matmul_qkv's one dispatch over matrices of one type and width, each in one chunk, with x in one binding
    // and the device's storage buffers enough; dv null: wq and wk only. kv_f16: k's and v's rows in binary16
    // pairs (matmul_qkv_f16; wv's rows must pair too).
    bool one_pass(const DeviceTensor& dq, const DeviceTensor& dk, const DeviceTensor* dv, int64_t T,
                  bool kv_f16 = false) const;
    void matvec_qkv(Buf q_out, Buf k_out, Buf v_out, Buf x, const DeviceTensor& dq, const DeviceTensor& dk,
                    const DeviceTensor* dv, int64_t T, int64_t pos0, bool kv_f16 = false);
    // matmul_qkv's and matmul_qkv_f16's fused part: None where it cannot run (the caller runs the interface's
    // default), Qk where wv's product is left to the caller, Qkv where all three ran.
    enum class QkvPass { None, Qk, Qkv };
    QkvPass fused_qkv(const char* op, Buf q_out, Buf k_out, Buf v_out, Buf x, const TensorView& wq,
                      const TensorView& wk, const TensorView& wv, int64_t T, int64_t n_heads, int64_t n_kv_heads,
                      int64_t pos0, bool kv_f16);
    // matmul_qkv's (kv_f16: matmul_qkv_f16's) fused form for these matrices and T tokens: RopeQkv (one dispatch),
    // RopeQk (wv's product on its own), their F16 forms, or Store where q, k and v cannot share a dispatch.
    Epilogue qkv_epilogue(const DeviceTensor& dq, const DeviceTensor& dk, const DeviceTensor& dv, int64_t n_heads,
                          int64_t n_kv_heads, int64_t T, bool kv_f16) const;
    // The same for a decode step of the layer whose wq is `wq`: what prepare_kernels() (kv_f16: prepare_f16_kv())
    // builds.
    Epilogue qkv_form(const Model& model, const std::string& wq, bool kv_f16);
    bool rope_fusable(const DeviceTensor& d, int64_t n_heads) const;  // pairs of rows stay in one workgroup
    bool norm_fusable(const DeviceTensor& d, int64_t T) const;         // matmul_add_rmsnorm's one dispatch
    bool pairs_fusable(const DeviceTensor& d) const;                  // the same, whatever the shape
    const Kernel& matmul_kernel(DType t);
    const Kernel& embed_kernel(DType t);
    const Kernel& rmsnorm_kernel(DType t);
    void prepare_kernels(const Model& model);  // at load: the pipelines a timed step would otherwise build
    void topk_pass(const Binding& in, bool merge, uint32_t items, uint32_t k, const Binding& out, uint32_t groups);

    BackendOptions options_;
    std::unique_ptr<Context> ctx_;  // first member: destroyed last, after everything that borrows it
    KernelTuning tuning_;
    std::string prefill_note_;  // why the prefill matmul is not on matrix units when the device has them
    std::map<std::string, Kernel, std::less<>> kernels_;
    std::vector<Slot> slots_;
    std::vector<uint32_t> free_slots_;
    std::vector<Buffer> retired_;  // freed during a step; destroyed once the step has run

    using TensorKey = std::tuple<const std::byte*, uint64_t, int, int32_t, int64_t, int64_t>;
    std::map<TensorKey, DeviceTensor> weights_;
    const Model* model_ = nullptr;
    std::vector<double> freqs_;         // [head_dim / 2] RoPE angle per position for each pair
    uint32_t rope_table_ = kUntracked;  // slot of the [positions, head_dim/2, (cos, sin)] table
    int64_t rope_positions_ = 0;
    uint32_t topk_scratch_ = kUntracked;       // slot of the top-k candidates (two halves, ping-pong)
    uint32_t attention_scratch_ = kUntracked;  // slot of split attention's partial sums
    // An internal scratch slot of at least `floats` (replaced by a bigger buffer when short).
    Buf scratch(uint32_t& slot, int64_t floats, const char* name);
    uint32_t dummy_ = kUntracked;  // slot bound where an op has no buffer (attention without probs)
    uint32_t norm_count_ = kUntracked;  // slot of matvec's NORM counter of finished workgroups (0 between dispatches)

    Sequence step_;
    // Descriptor sets live across steps, cached by (layout, buffer ranges): a decode step binds the same ranges
    // as the one before, so it allocates and writes almost none. Destroying any buffer makes the cache stale;
    // it is dropped (and its pools reset) when the next step begins, as commands being recorded may still use it.
    DescriptorArena descriptors_;
    struct SetKey {
        VkDescriptorSetLayout layout = VK_NULL_HANDLE;
        uint32_t count = 0;
        VkDescriptorBufferInfo infos[8]{};
        bool operator==(const SetKey& o) const;
    };
    struct SetKeyHash {
        size_t operator()(const SetKey& k) const;
    };
    std::unordered_map<SetKey, VkDescriptorSet, SetKeyHash> set_cache_;
    bool sets_stale_ = false;
    void forget_descriptor_sets() {
        set_cache_.clear();
        sets_stale_ = true;
    }
    // A set binding each of `buffers` whole at bindings 0, 1, ..., for a one-off run outside a step (the
    // bandwidth probe, the cooperative-matrix check): the cache is forgotten, as these buffers die soon.
    VkDescriptorSet one_off_set(const Kernel& k, std::initializer_list<const Buffer*> buffers);
    HostArena tokens_;
    HostArena results_;
    VkQueryPool timestamps_ = VK_NULL_HANDLE;  // [0] step start, [1] step end, [2..] per dispatch when profiling
    double last_step_ms_ = -1;
    VulkanStepStats stats_, last_stats_;  // the step being recorded, the last one run
    std::chrono::steady_clock::time_point step_began_;
    // STRATA_VK_PROFILE=1: a timestamp after every dispatch; GPU time summed per kernel (profile_report()).
    struct KernelTime {
        double ms = 0;
        int64_t calls = 0;
    };
    bool profiling_ = false;
    bool lost_ = false;  // VK_ERROR_DEVICE_LOST seen: every later step fails at once
    std::vector<std::string> profiled_;  // kernel of each per-dispatch timestamp in this step
    std::map<std::string, KernelTime> profile_;
    VkPipeline bound_pipeline_ = VK_NULL_HANDLE;
    // The part of the step being recorded: its dispatches, and how many it takes before it is submitted.
    int64_t part_dispatches_ = 0, part_limit_ = 0;
    void submit_part();  // submits what was recorded and goes on in a new command buffer
    // Byte ranges of buffers touched since the last barrier: disjoint ranges of one buffer (the rows of the
    // logits written chunk by chunk, a KV cache row) need no barrier between them.
    struct Touched {
        uint32_t id;
        uint64_t begin, end;
    };
    std::vector<Touched> written_, read_;

    struct Pending {
        bool is_topk = false;
        HostSlice where;
        int64_t count = 0;       // floats (readback) or k (top-k)
        bool host_topk = false;  // k beyond the device kernel's limit: the row was read back, sorted on the host
        int64_t n = 0;
    };
    std::vector<Pending> pending_;
    bool results_ready_ = false;
};

}  // namespace strata::vk
