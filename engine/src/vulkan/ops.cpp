// The ops of a step, recorded as dispatches. Each works out its bindings (splitting work whose data exceed one
// binding), fills the push constants its shader declares, and dispatches. Host mirrors of the push-constant
// blocks are plain structs of 32-bit fields in the shader's order.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>

#include "strata/error.hpp"
#include "strata/model.hpp"
#include "vulkan/vulkan_backend.hpp"

namespace strata::vk {

namespace {

uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }
uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

constexpr uint32_t kElementwiseWG = 256;     // local_size_x of add, copy, swiglu, embed, rope
constexpr uint32_t kTileT = 64, kTileN = 128;  // matmul.comp's BM (tokens) and BN (weight rows)
constexpr uint32_t kTopkPerInvocation = 16;  // topk.comp's E
constexpr int64_t kTopkMax = 64;             // larger k is ranked on the host from a readback
constexpr int64_t kMaxHeadDim = 256;         // attention.comp keeps 2 * WG output dims per invocation
// attention_grouped.comp: its workgroup size, query rows and their floats, and the floats of a staged key block.
constexpr int64_t kGroupedWG = 128, kGroupedRows = 8, kGroupedRowFloats = 1024, kGroupedKeyFloats = 2112;
// attention_flash.comp: its workgroup size, dims per lane and keys per block at most, floats of a staged block.
constexpr int64_t kFlashMaxDims = 32, kFlashMaxKeys = 32, kFlashBlockFloats = 2048;

struct ElementwisePush {
    uint32_t n, a_first, b_first, o_first;
};
struct CopyPush {
    uint32_t n, s_first, d_first;
};
struct EmbedPush {
    uint32_t T, dim, row0, rows, tok_first, o_first;
};
struct RmsnormPush {
    uint32_t n, T, x_first, o_first;
    float eps;
};
struct MatvecPush {
    uint32_t rows, cols, T, x_first, o_first, o_stride, row_groups;
    uint32_t row_base, half_dim, table_first;  // ROPE only: the other variants declare the fields above
};
constexpr uint32_t kMatvecPushBytes = 7 * sizeof(uint32_t);
struct MatvecQkvPush {
    MatvecPush q;                                           // wq's rows, x, the table
    uint32_t rows_b, row_groups_b, o_first_b, o_stride_b;  // wk's
    uint32_t rows_c, row_groups_c, o_first_c, o_stride_c;  // wv's (QKV only)
};
constexpr uint32_t kMatvecQkPushBytes = sizeof(MatvecPush) + 4 * sizeof(uint32_t);
struct MatvecNormPush {
    uint32_t rows, cols, T, x_first, o_first, o_stride, row_groups;  // as MatvecPush's first fields
    uint32_t gain_type, n_first;                                     // gain: 0 f32, 1 f16, 2 bf16
    float eps;
};
constexpr uint32_t kNormSharedBytes = 65 * 4;  // norm.glsl's 64 lane sums and matvec's flag
struct RopePush {
    uint32_t T, pairs_per_row, half_dim, x_first, table_first;
};
struct AttentionShape {  // the fields both attention shaders' push constants begin with
    uint32_t T, pos0, n_heads, n_rep, head_dim, kv_dim;
    uint32_t q_first, k_first, v_first, o_first;
};
struct AttentionPush {
    AttentionShape shape;
    uint32_t p_first;
    uint32_t write_probs;
    float scale;
    uint32_t p_T, p_t0, p_L;
    uint32_t n_splits, split_keys;
};
struct GroupedAttentionPush {
    AttentionShape shape;
    float scale;
    uint32_t qt, bk;
    uint32_t n_splits, split_keys;
};
struct FlashAttentionPush {
    AttentionShape shape;
    float scale;
    uint32_t qt;
};
struct CombinePush {
    uint32_t T, n_heads, head_dim, n_splits, parts_first, o_first;
};
struct TopkPush {
    uint32_t n, k, in_first, out_first;
};

// The kernels with one variant, as each op builds them (prepare_kernels() builds the same ones at load).
constexpr KernelShape kSwiglu{"swiglu", 3, sizeof(ElementwisePush)};
constexpr KernelShape kAdd{"add", 3, sizeof(ElementwisePush)};
constexpr KernelShape kCopy{"copy", 2, sizeof(CopyPush)};
constexpr KernelShape kRope{"rope", 2, sizeof(RopePush)};
constexpr KernelShape kAttention{"attention", 5, sizeof(AttentionPush)};
constexpr KernelShape kAttentionSplit{"attention_split", 5, sizeof(AttentionPush)};
constexpr KernelShape kAttentionCombine{"attention_combine", 2, sizeof(CombinePush)};
constexpr KernelShape kAttentionGrouped{"attention_grouped", 4, sizeof(GroupedAttentionPush)};
constexpr KernelShape kAttentionGroupedSplit{"attention_grouped_split", 4, sizeof(GroupedAttentionPush)};
constexpr KernelShape kAttentionFlash{"attention_flash", 4, sizeof(FlashAttentionPush)};
// The same over a KV cache in binary16 (kv.glsl's KV_F16), and its writer.
constexpr KernelShape kAttentionF16{"attention_f16", 5, sizeof(AttentionPush)};
constexpr KernelShape kAttentionSplitF16{"attention_split_f16", 5, sizeof(AttentionPush)};
constexpr KernelShape kAttentionGroupedF16{"attention_grouped_f16", 4, sizeof(GroupedAttentionPush)};
constexpr KernelShape kAttentionGroupedSplitF16{"attention_grouped_split_f16", 4, sizeof(GroupedAttentionPush)};
constexpr KernelShape kAttentionFlashF16{"attention_flash_f16", 4, sizeof(FlashAttentionPush)};
constexpr KernelShape kPackF16{"pack_f16", 2, sizeof(CopyPush)};
constexpr KernelShape kTopk{"topk", 2, sizeof(TopkPush)};
constexpr KernelShape kTopkMerge{"topk_merge", 2, sizeof(TopkPush)};

}  // namespace

const ModelConfig& VulkanBackend::config(const char* op) const {
    if (!model_) throw Error(std::string("vulkan backend: ") + op + " before load()");
    return model_->config;
}

VariantName::VariantName(std::initializer_list<std::string_view> parts, DType t) {
    for (std::string_view part : parts) append(part);
    append("_");
    const size_t first = size_;
    append(dtype_name(t));
    for (size_t i = first; i < size_; ++i) text_[i] = static_cast<char>(std::tolower(text_[i]));
}

void VariantName::append(std::string_view s) {
    if (s.empty()) return;  // an empty view's data() may be null, which memcpy must not get
    if (s.size() > sizeof text_ - size_) throw Error("vulkan backend: shader variant name too long");
    std::memcpy(text_ + size_, s.data(), s.size());
    size_ += s.size();
}

// ---------------------------------------------------------------------------------------------- elementwise

void VulkanBackend::swiglu(Buf out, Buf a, Buf b, int64_t n) {
    require_recording("swiglu");
    const Kernel& k = kernel(kSwiglu);
    for (int64_t i0 = 0; i0 < n; i0 += max_binding_floats()) {
        const int64_t c = std::min(max_binding_floats(), n - i0);
        const Binding bs[] = {bind(a, i0, c, false, "swiglu"), bind(b, i0, c, false, "swiglu"),
                              bind(out, i0, c, true, "swiglu")};
        const ElementwisePush push{u32(c), bs[0].first, bs[1].first, bs[2].first};
        dispatch(k, bs, &push, ceil_div(static_cast<uint64_t>(c), kElementwiseWG));
    }
}

void VulkanBackend::add(Buf out, Buf a, Buf b, int64_t n) {
    require_recording("add");
    const Kernel& k = kernel(kAdd);
    for (int64_t i0 = 0; i0 < n; i0 += max_binding_floats()) {
        const int64_t c = std::min(max_binding_floats(), n - i0);
        const Binding bs[] = {bind(a, i0, c, false, "add"), bind(b, i0, c, false, "add"),
                              bind(out, i0, c, true, "add")};
        const ElementwisePush push{u32(c), bs[0].first, bs[1].first, bs[2].first};
        dispatch(k, bs, &push, ceil_div(static_cast<uint64_t>(c), kElementwiseWG));
    }
}

void VulkanBackend::copy(Buf dst, Buf src, int64_t n) {
    require_recording("copy");
    if (dst.id == src.id && n > 0 && dst.offset < src.offset + n && src.offset < dst.offset + n &&
        dst.offset != src.offset)
        throw Error("vulkan backend: copy between overlapping ranges of one buffer");
    const Kernel& k = kernel(kCopy);
    for (int64_t i0 = 0; i0 < n; i0 += max_binding_floats()) {
        const int64_t c = std::min(max_binding_floats(), n - i0);
        const Binding bs[] = {bind(src, i0, c, false, "copy"), bind(dst, i0, c, true, "copy")};
        const CopyPush push{u32(c), bs[0].first, bs[1].first};
        dispatch(k, bs, &push, ceil_div(static_cast<uint64_t>(c), kElementwiseWG));
    }
}

// ---------------------------------------------------------------------------------------------- embed, norm

void VulkanBackend::embed(Buf out, std::span<const int32_t> tokens) {
    require_recording("embed");
    config("embed");
    const TensorView& table = model_->tensor("tok_embeddings");  // [vocab, dim]
    const auto T = static_cast<int64_t>(tokens.size());
    if (T == 0) return;
    for (int64_t t = 0; t < T; ++t) {
        const int32_t id = tokens[static_cast<size_t>(t)];
        if (id < 0 || id >= table.rows())
            throw InputError("token id " + std::to_string(id) + " at position " + std::to_string(t) +
                             " is outside the vocabulary (0.." + std::to_string(table.rows() - 1) + ")");
    }
    const DeviceTensor& d = device_tensor(table);
    // The tokens go into this step's own slice of an upload page: several embeds in a step keep theirs.
    const HostSlice slice = reserve(tokens_, static_cast<uint64_t>(T) * 4, "the tokens of a step");
    std::memcpy(tokens_.pages[slice.page].mapped() + slice.offset, tokens.data(), static_cast<size_t>(T) * 4);
    const Binding tok = bind_host(tokens_, slice, static_cast<uint64_t>(T) * 4, false);

    const Kernel& k = embed_kernel(d.dtype);
    const int64_t per = std::max<int64_t>(1, max_binding_floats() / d.cols);  // tokens per output binding
    for (int64_t t0 = 0; t0 < T; t0 += per) {
        const int64_t tc = std::min(per, T - t0);
        const Binding o = bind(out, t0 * d.cols, tc * d.cols, true, "embed");
        for (const DeviceTensor::Chunk& c : d.chunks) {
            // Only the chunks that hold one of these tokens' rows get a dispatch.
            const bool needed = std::any_of(tokens.begin() + t0, tokens.begin() + t0 + tc,
                                            [&](int32_t id) { return id >= c.row0 && id < c.row0 + c.rows; });
            if (!needed) continue;
            const Binding bs[] = {bind_weight(c), tok, o};
            const EmbedPush push{u32(tc), u32(d.cols), u32(c.row0), u32(c.rows), u32(t0), o.first};
            dispatch(k, bs, &push, ceil_div(static_cast<uint64_t>(tc * d.cols), kElementwiseWG));
        }
    }
}

void VulkanBackend::rmsnorm(Buf out, Buf x, const TensorView& weight, int64_t T, float eps) {
    require_recording("rmsnorm");
    const DeviceTensor& d = device_tensor(weight);
    const int64_t n = d.rows * d.cols;  // [n], the gain
    if (d.chunks.size() != 1) throw UnsupportedError("vulkan backend: rmsnorm gain " + d.name + " split over bindings");
    const Kernel& k = rmsnorm_kernel(d.dtype);
    const int64_t per = std::max<int64_t>(1, max_binding_floats() / n);
    for (int64_t t0 = 0; t0 < T; t0 += per) {
        const int64_t tc = std::min(per, T - t0);
        const Binding bs[] = {bind(x, t0 * n, tc * n, false, "rmsnorm"), bind_weight(d.chunks[0]),
                              bind(out, t0 * n, tc * n, true, "rmsnorm")};
        const RmsnormPush push{u32(n), u32(tc), bs[0].first, bs[2].first, eps};
        dispatch(k, bs, &push, static_cast<uint64_t>(tc));
    }
}

// ---------------------------------------------------------------------------------------------- matmul

uint32_t VulkanBackend::matvec_tokens(int64_t T, Epilogue e) const {
    uint32_t nt = T == 1 ? 1 : T == 2 ? 2 : T <= 4 ? 4 : 8;
    // matvec.comp keeps ROWS * NT * WG partial sums in shared memory (twice that with SWIGLU): fewer tokens per
    // pass if they do not fit.
    const uint64_t rows = uint64_t(tuning_.matvec_rows) * (e == Epilogue::Swiglu ? 2 : 1);
    const uint64_t extra = e == Epilogue::AddNorm ? kNormSharedBytes : 0;
    while (nt > 1 && rows * nt * tuning_.matvec_workgroup * 4 + extra > ctx_->limits().maxComputeSharedMemorySize)
        nt /= 2;
    return nt;
}

bool VulkanBackend::matvec_vec_form(const DeviceTensor& d) {
    // The 16-byte form needs whole 16-byte words per row (and x on a 16-byte boundary, which the op checks).
    // Block types read x a unit (32 floats) at a time; their rows always qualify.
    const int64_t per_word = d.dtype == DType::F32 ? 4 : dtype_is_block(d.dtype) ? 32 : 8;
    return d.cols % per_word == 0;
}

const Kernel& VulkanBackend::matvec_kernel(DType t, bool vec, uint32_t nt, Epilogue e) {
    // The epilogue's part of the variant's name (matvec.comp's defines in shaders/variants.cmake), its storage
    // buffers and push constants.
    std::string_view form;
    uint32_t buffers = 3, push = kMatvecPushBytes;
    switch (e) {
        case Epilogue::Store: break;
        case Epilogue::Add: form = "_add"; break;
        case Epilogue::AddNorm: form = "_add_norm", buffers = 6, push = sizeof(MatvecNormPush); break;
        case Epilogue::Swiglu: form = "_swiglu", buffers = 4; break;
        case Epilogue::Rope: form = "_rope", buffers = 4, push = sizeof(MatvecPush); break;
        case Epilogue::StoreF16: form = "_f16out"; break;
        case Epilogue::RopeQk: form = "_rope_qk", buffers = 6, push = kMatvecQkPushBytes; break;
        case Epilogue::RopeQkv: form = "_rope_qkv", buffers = 8, push = sizeof(MatvecQkvPush); break;
        case Epilogue::RopeQkF16: form = "_rope_qk_kvf16", buffers = 6, push = kMatvecQkPushBytes; break;
        case Epilogue::RopeQkvF16: form = "_rope_qkv_kvf16", buffers = 8, push = sizeof(MatvecQkvPush); break;
        case Epilogue::RopeF16: form = "_rope_f16out", buffers = 4, push = sizeof(MatvecPush); break;
    }
    return kernel(VariantName({"matvec", vec ? "_vec" : "", form}, t), buffers, push,
                  {tuning_.matvec_workgroup, tuning_.matvec_rows, nt, tuning_.byte_float_bits,
                   tuning_.matvec_quad_lanes, tuning_.matvec_loads});
}

// matmul.comp (or matmul_coopmat.comp: the same tiles, bindings and push constants) and embed.comp have no
// constants of their own: ids 0-2 are placeholders, 3 is quant.glsl's.
const Kernel& VulkanBackend::matmul_kernel(DType t) {
    const std::string_view form = tuning_.prefill == KernelTuning::Prefill::Coopmat    ? "_coopmat"
                                  : tuning_.prefill == KernelTuning::Prefill::Emulated ? "_coopmat_emulated"
                                  : tuning_.matmul_tile8                                ? "_t8"
                                                                                        : "";
    return kernel(VariantName({"matmul", form}, t), 3, sizeof(MatmulPush), {0, 0, 0, tuning_.byte_float_bits});
}
const Kernel& VulkanBackend::embed_kernel(DType t) {
    return kernel(VariantName({"embed"}, t), 3, sizeof(EmbedPush), {0, 0, 0, tuning_.byte_float_bits});
}
const Kernel& VulkanBackend::rmsnorm_kernel(DType t) {
    if (dtype_is_block(t))  // gains are vectors: rmsnorm.comp reads the float types only
        throw UnsupportedError("not supported: " + std::string(dtype_name(t)) + " gains in rmsnorm (Vulkan backend)");
    return kernel(VariantName({"rmsnorm"}, t), 3, sizeof(RmsnormPush), {tuning_.norm_workgroup});
}

VulkanBackend::FlashShape VulkanBackend::flash_shape(const ModelConfig& c) const {
    // Lanes per row: the largest power of two up to the device's limit that divides head_dim and leaves each
    // lane at least 16 dims; none where a lane would need more than the shader's registers, where a KV head has
    // more query heads than a workgroup has rows, or where the tiles are off.
    const int64_t head_dim = c.head_dim;
    int64_t lanes = 1;
    while (lanes * 2 <= tuning_.attention_flash_lanes && lanes * 32 <= head_dim && head_dim % (lanes * 2) == 0)
        lanes *= 2;
    if (tuning_.attention_flash_from <= 0 || head_dim < 1 || head_dim % lanes != 0 ||
        head_dim / lanes > kFlashMaxDims || c.n_rep() > int64_t(tuning_.attention_flash_wg) / lanes)
        return {};
    return {u32(lanes), u32(head_dim / lanes), u32(std::min(kFlashMaxKeys, kFlashBlockFloats / head_dim)),
            tuning_.attention_flash_wg / lanes / c.n_rep(), tuning_.attention_flash_wg};
}
const Kernel& VulkanBackend::flash_kernel(const FlashShape& s, bool kv_f16) {
    return kernel(kv_f16 ? kAttentionFlashF16 : kAttentionFlash, {s.lanes, s.dims, s.keys, s.wg});
}

void VulkanBackend::prepare_kernels(const Model& model) {
    // Every pipeline a decode step runs, and the prompt kernels of each weight, built (or read from the pipeline
    // cache) now, so that no timed step compiles one. Other shapes (short prompts' matvec forms, top-k merges of
    // long rows) are built on first use as before.
    for (const KernelShape* s : {&kSwiglu, &kAdd, &kCopy, &kRope, &kAttention, &kAttentionSplit, &kAttentionCombine,
                              &kAttentionGrouped, &kAttentionGroupedSplit})
        kernel(*s);
    if (const FlashShape fs = flash_shape(model.config); fs.lanes > 0) flash_kernel(fs);
    kernel(kTopk, {tuning_.topk_workgroup});
    kernel(kTopkMerge, {tuning_.topk_workgroup});
    for (const auto& [name, t] : model.tensors) {
        const DeviceTensor& d = device_tensor(t);
        if (t.shape.size() == 1) {
            rmsnorm_kernel(d.dtype);
            continue;
        }
        if (name == "tok_embeddings") embed_kernel(d.dtype);
        if (name == "tok_embeddings" && !model.config.tie_embeddings) continue;  // read by rows, not a product
        // wo and w2 add into the residual stream (matmul_add) unless the trace keeps their products; w1 runs
        // with w3 and the gate (matmul_swiglu); wq and wk with RoPE (matmul_rope). Every weight also plainly.
        std::vector<Epilogue> epilogues{Epilogue::Store};
        const bool adds = name.ends_with("attention.wo") || name.ends_with("feed_forward.w2");
        const bool rotates = (name.ends_with("attention.wq") && rope_fusable(d, model.config.n_heads)) ||
                             (name.ends_with("attention.wk") && rope_fusable(d, model.config.n_kv_heads));
        if (tuning_.fuse && adds) epilogues.push_back(Epilogue::Add);
        if (tuning_.fuse && adds && norm_fusable(d, 1)) epilogues.push_back(Epilogue::AddNorm);
        if (tuning_.fuse && name.ends_with("feed_forward.w1")) epilogues.push_back(Epilogue::Swiglu);
        if (tuning_.fuse && rotates) epilogues.push_back(Epilogue::Rope);
        if (tuning_.fuse && rotates && name.ends_with("attention.wq"))  // matmul_qkv's one dispatch
            if (const Epilogue e = qkv_form(model, name, false); e != Epilogue::Store) epilogues.push_back(e);
        for (Epilogue e : epilogues) {
            matvec_kernel(d.dtype, matvec_vec_form(d), 1, e);
            // A prompt on a CPU device, where matvec also runs prompts: its widest pass.
            if (tuning_.matvec_max_tokens >= 8) matvec_kernel(d.dtype, matvec_vec_form(d), matvec_tokens(8, e), e);
        }
        matmul_kernel(d.dtype);  // a prompt: the tiled matmul
    }
}

void VulkanBackend::matmul(Buf out, Buf x, const TensorView& w, int64_t T) {
    require_recording("matmul");
    if (T <= 0) return;
    if (out.id == x.id) throw Error("vulkan backend: matmul output aliases its input (" + w.name + ")");
    const DeviceTensor& d = device_tensor(w);
    const int64_t K = d.cols, N = d.rows;  // w: [N, K]; x: [T, K]; out: [T, N]

    if (T <= tuning_.matvec_max_tokens) return matvec(out, x, d, T, Epilogue::Store);

    // Prefill: tiles of 64 tokens x 128 rows (on float32 FMAs or matrix units); tokens split further when x or out
    // would exceed one binding.
    const Kernel& k = matmul_kernel(d.dtype);
    const int64_t per = std::max<int64_t>(1, max_binding_floats() / std::max(K, N));
    for (const DeviceTensor::Chunk& c : d.chunks) {
        for (int64_t t0 = 0; t0 < T; t0 += per) {
            const int64_t tc = std::min(per, T - t0);
            const Binding bs[] = {bind_weight(c), bind(x, t0 * K, tc * K, false, "matmul"),
                                  bind(out, t0 * N + c.row0, (tc - 1) * N + c.rows, true, "matmul")};
            const uint32_t tiles_n = u32(ceil_div(static_cast<uint64_t>(c.rows), kTileN));
            const MatmulPush push{u32(tc), u32(c.rows), u32(K), bs[1].first, bs[2].first, u32(N), tiles_n};
            dispatch(k, bs, &push, static_cast<uint64_t>(tiles_n) * ceil_div(static_cast<uint64_t>(tc), kTileT));
        }
    }
}

void VulkanBackend::matvec(Buf out, Buf x, const DeviceTensor& d, int64_t T, Epilogue e, const DeviceTensor* w3,
                           int64_t pos0) {
    // Decode and short prompts: stream the weights once per NT tokens. The 16-byte form needs whole 16-byte
    // words per row and x on a 16-byte boundary. In every epilogue each output element is read and written only
    // by the invocation that finishes its sum (with ROPE, its pair's partner too).
    const int64_t K = d.cols, N = d.rows;
    const uint32_t nt = matvec_tokens(T, e);
    const bool vec = matvec_vec_form(d) && (x.offset % 4) == 0;
    const Kernel& k = matvec_kernel(d.dtype, vec, nt, e);
    const bool rope = e == Epilogue::Rope || e == Epilogue::RopeF16;
    const bool f16 = e == Epilogue::StoreF16 || e == Epilogue::RopeF16;  // out: binary16 pairs, two to a word
    const int64_t half = rope ? config("matmul_rope").head_dim / 2 : 0;
    if (rope) ensure_rope_table(pos0 + T);
    const int64_t per = std::max<int64_t>(1, max_binding_floats() / std::max(K, N));  // tokens per binding
    // One dispatch in all (decode): out's descriptor covers its whole buffer, so the set is the same whichever
    // rows it writes (a KV cache's row at pos0 moves every step).
    const bool single = d.chunks.size() == 1 && per >= T;
    for (size_t ci = 0; ci < d.chunks.size(); ++ci) {
        const DeviceTensor::Chunk& c = d.chunks[ci];
        for (int64_t t0 = 0; t0 < T; t0 += per) {
            const int64_t tc = std::min(per, T - t0);
            const int64_t o0 = t0 * N + c.row0, on = (tc - 1) * N + c.rows;  // out's elements (even with f16)
            Binding bs[4] = {bind_weight(c), bind(x, t0 * K, tc * K, false, "matmul"),
                             f16 ? bind(out, o0 / 2, on / 2, true, "matmul", single)
                                 : bind(out, o0, on, true, "matmul", single)};
            if (e == Epilogue::Swiglu) bs[3] = bind_weight(w3->chunks[ci]);  // the same rows of w3
            uint32_t table_first = 0;
            if (rope) {
                const TableBinding tb = bind_rope_table(pos0 + t0, tc, half, "matmul_rope");
                bs[3] = tb.binding;
                table_first = tb.first;
            }
            const uint32_t row_groups = u32(ceil_div(static_cast<uint64_t>(c.rows), tuning_.matvec_rows));
            const MatvecPush push{u32(c.rows), u32(K),     u32(tc),   bs[1].first, bs[2].first, u32(N),
                                  row_groups,  u32(c.row0), u32(half), table_first};
            dispatch(k, std::span<const Binding>(bs, k.buffers()), &push,
                     uint64_t(row_groups) * ceil_div(static_cast<uint64_t>(tc), nt));
        }
    }
}

void VulkanBackend::matmul_add(Buf out, Buf x, const TensorView& w, int64_t T, Buf scratch) {
    require_recording("matmul_add");
    if (T <= 0) return;
    if (out.id == x.id) throw Error("vulkan backend: matmul_add output aliases its input (" + w.name + ")");
    const DeviceTensor& d = device_tensor(w);
    if (T > tuning_.matvec_max_tokens || !tuning_.fuse)  // the tiled kernel, or fusion off
        return Backend::matmul_add(out, x, w, T, scratch);
    matvec(out, x, d, T, Epilogue::Add);
}

bool VulkanBackend::norm_fusable(const DeviceTensor& d, int64_t T) const {
    // matvec's NORM tail: one dispatch of one token group in one dimension of workgroups (its last workgroup
    // counts them all), the product in one chunk, x and out in one binding, six storage buffers.
    const VkPhysicalDeviceLimits& l = ctx_->limits();
    return tuning_.fuse && T <= tuning_.matvec_max_tokens && T <= matvec_tokens(T, Epilogue::AddNorm) &&
           d.chunks.size() == 1 && max_binding_floats() / std::max(d.cols, d.rows) >= T &&
           ceil_div(static_cast<uint64_t>(d.rows), tuning_.matvec_rows) <= ctx_->max_groups_x() &&
           l.maxPerStageDescriptorStorageBuffers >= 6 && l.maxDescriptorSetStorageBuffers >= 6;
}

void VulkanBackend::matmul_add_rmsnorm(Buf out, Buf x, const TensorView& w, int64_t T, Buf scratch, Buf norm_out,
                                       const TensorView& norm_weight, float eps) {
    require_recording("matmul_add_rmsnorm");
    if (T <= 0) return;
    if (out.id == x.id || norm_out.id == out.id || norm_out.id == x.id)
        throw Error("vulkan backend: matmul_add_rmsnorm's buffers alias (" + w.name + ")");
    const DeviceTensor& d = device_tensor(w);
    const DeviceTensor& g = device_tensor(norm_weight);
    const uint32_t gain_type = g.dtype == DType::F32 ? 0 : g.dtype == DType::F16 ? 1 : g.dtype == DType::BF16 ? 2 : 3;
    if (!norm_fusable(d, T) || gain_type == 3 || g.chunks.size() != 1 || g.rows * g.cols != d.rows)
        return Backend::matmul_add_rmsnorm(out, x, w, T, scratch, norm_out, norm_weight, eps);
    // The product added into out as matmul_add's matvec does, then the last workgroup normalizes the T new rows
    // as rmsnorm.comp does (norm.glsl): the same bits as the two ops.
    const int64_t K = d.cols, N = d.rows;
    const uint32_t nt = matvec_tokens(T, Epilogue::AddNorm);
    const bool vec = matvec_vec_form(d) && (x.offset % 4) == 0;
    const Kernel& k = matvec_kernel(d.dtype, vec, nt, Epilogue::AddNorm);
    const Binding bs[6] = {bind_weight(d.chunks[0]),
                           bind(x, 0, T * K, false, "matmul"),
                           bind(out, 0, T * N, true, "matmul", true),
                           bind_weight(g.chunks[0]),
                           bind(norm_out, 0, T * N, true, "matmul_add_rmsnorm", true),
                           bind(Buf{norm_count_, 0, 1}, 0, 1, true, "matmul_add_rmsnorm")};
    const uint32_t row_groups = u32(ceil_div(static_cast<uint64_t>(N), tuning_.matvec_rows));
    const MatvecNormPush push{u32(N), u32(K), u32(T), bs[1].first, bs[2].first, u32(N), row_groups,
                              gain_type, bs[4].first, eps};
    dispatch(k, bs, &push, row_groups);
}

void VulkanBackend::matmul_swiglu(Buf out, Buf x, const TensorView& w1, const TensorView& w3, int64_t T,
                                  Buf a_scratch, Buf b_scratch) {
    require_recording("matmul_swiglu");
    if (T <= 0) return;
    if (out.id == x.id) throw Error("vulkan backend: matmul_swiglu output aliases its input (" + w1.name + ")");
    const DeviceTensor& d1 = device_tensor(w1);
    const DeviceTensor& d3 = device_tensor(w3);
    // One dispatch per chunk reads the same rows of both: their types, shapes and chunks must agree (they do
    // for every Llama checkpoint; a mixed quantization of w1 and w3 takes the default).
    bool same = d1.dtype == d3.dtype && d1.rows == d3.rows && d1.cols == d3.cols &&
                d1.chunks.size() == d3.chunks.size();
    for (size_t i = 0; same && i < d1.chunks.size(); ++i)
        same = d1.chunks[i].row0 == d3.chunks[i].row0 && d1.chunks[i].rows == d3.chunks[i].rows;
    if (T > tuning_.matvec_max_tokens || !same || !tuning_.fuse)
        return Backend::matmul_swiglu(out, x, w1, w3, T, a_scratch, b_scratch);
    matvec(out, x, d1, T, Epilogue::Swiglu, &d3);
}

bool VulkanBackend::pairs_fusable(const DeviceTensor& d) const {
    // Rows (2i, 2i + 1) both in one workgroup: ROWS even, every chunk starting on an even row, an even row count.
    if (tuning_.matvec_rows % 2 != 0 || d.rows % 2 != 0) return false;
    return std::all_of(d.chunks.begin(), d.chunks.end(), [](const DeviceTensor::Chunk& c) { return c.row0 % 2 == 0; });
}

bool VulkanBackend::rope_fusable(const DeviceTensor& d, int64_t n_heads) const {
    // A rotated pair is rows (2i, 2i + 1) of one head.
    return model_ && d.rows == n_heads * model_->config.head_dim && pairs_fusable(d);
}

void VulkanBackend::matmul_store_f16(Buf out, Buf x, const TensorView& w, int64_t T, int64_t rope_heads,
                                     int64_t pos0, Buf scratch) {
    require_recording("matmul_store_f16");
    if (T <= 0) return;
    const DeviceTensor& d = device_tensor(w);
    const bool rope = rope_heads > 0;
    if (T > tuning_.matvec_max_tokens || !tuning_.fuse || !(rope ? rope_fusable(d, rope_heads) : pairs_fusable(d)))
        return Backend::matmul_store_f16(out, x, w, T, rope_heads, pos0, scratch);
    matvec(out, x, d, T, rope ? Epilogue::RopeF16 : Epilogue::StoreF16, nullptr, pos0);
}

void VulkanBackend::matmul_rope(Buf out, Buf x, const TensorView& w, int64_t T, int64_t n_heads, int64_t pos0) {
    require_recording("matmul_rope");
    if (T <= 0) return;
    if (out.id == x.id) throw Error("vulkan backend: matmul_rope output aliases its input (" + w.name + ")");
    const DeviceTensor& d = device_tensor(w);
    if (T > tuning_.matvec_max_tokens || !rope_fusable(d, n_heads) || !tuning_.fuse)
        return Backend::matmul_rope(out, x, w, T, n_heads, pos0);
    matvec(out, x, d, T, Epilogue::Rope, nullptr, pos0);
}

VulkanBackend::Epilogue VulkanBackend::qkv_form(const Model& model, const std::string& wq, bool kv_f16) {
    const std::string layer = wq.substr(0, wq.size() - 2);
    const auto q = model.tensors.find(wq), k = model.tensors.find(layer + "wk"), v = model.tensors.find(layer + "wv");
    if (q == model.tensors.end() || k == model.tensors.end() || v == model.tensors.end()) return Epilogue::Store;
    return qkv_epilogue(device_tensor(q->second), device_tensor(k->second), device_tensor(v->second),
                        model.config.n_heads, model.config.n_kv_heads, 1, kv_f16);
}

VulkanBackend::Epilogue VulkanBackend::qkv_epilogue(const DeviceTensor& dq, const DeviceTensor& dk,
                                                    const DeviceTensor& dv, int64_t n_heads, int64_t n_kv_heads,
                                                    int64_t T, bool kv_f16) const {
    if (!rope_fusable(dq, n_heads) || !rope_fusable(dk, n_kv_heads)) return Epilogue::Store;
    if (one_pass(dq, dk, &dv, T, kv_f16)) return kv_f16 ? Epilogue::RopeQkvF16 : Epilogue::RopeQkv;
    if (one_pass(dq, dk, nullptr, T, kv_f16)) return kv_f16 ? Epilogue::RopeQkF16 : Epilogue::RopeQk;
    return Epilogue::Store;
}

bool VulkanBackend::one_pass(const DeviceTensor& dq, const DeviceTensor& dk, const DeviceTensor* dv, int64_t T,
                             bool kv_f16) const {
    const uint32_t buffers = dv ? 8 : 6;
    if (kv_f16 && dv && !pairs_fusable(*dv)) return false;
    const VkPhysicalDeviceLimits& l = ctx_->limits();
    if (l.maxPerStageDescriptorStorageBuffers < buffers || l.maxDescriptorSetStorageBuffers < buffers) return false;
    int64_t widest = std::max({dq.cols, dq.rows, dk.rows});
    for (const DeviceTensor* d : {&dk, dv}) {
        if (!d) continue;
        if (d->dtype != dq.dtype || d->cols != dq.cols || d->chunks.size() != 1) return false;
        widest = std::max(widest, d->rows);
    }
    return dq.chunks.size() == 1 && max_binding_floats() / widest >= T;
}

VulkanBackend::QkvPass VulkanBackend::fused_qkv(const char* op, Buf q_out, Buf k_out, Buf v_out, Buf x,
                                                const TensorView& wq, const TensorView& wk, const TensorView& wv,
                                                int64_t T, int64_t n_heads, int64_t n_kv_heads, int64_t pos0,
                                                bool kv_f16) {
    if (q_out.id == x.id || k_out.id == x.id || v_out.id == x.id)
        throw Error(std::string("vulkan backend: ") + op + " output aliases its input (" + wq.name + ")");
    const DeviceTensor& dq = device_tensor(wq);
    const DeviceTensor& dk = device_tensor(wk);
    const DeviceTensor& dv = device_tensor(wv);
    if (T > tuning_.matvec_max_tokens || !tuning_.fuse) return QkvPass::None;
    const Epilogue e = qkv_epilogue(dq, dk, dv, n_heads, n_kv_heads, T, kv_f16);
    if (e == Epilogue::Store) return QkvPass::None;
    // wv of another type (a Q4_K_M file's Q6_K layers) or shape: its product is left to the caller.
    const bool with_v = e == Epilogue::RopeQkv || e == Epilogue::RopeQkvF16;
    matvec_qkv(q_out, k_out, v_out, x, dq, dk, with_v ? &dv : nullptr, T, pos0, kv_f16);
    return with_v ? QkvPass::Qkv : QkvPass::Qk;
}

void VulkanBackend::matmul_qkv(Buf q_out, Buf k_out, Buf v_out, Buf x, const TensorView& wq, const TensorView& wk,
                               const TensorView& wv, int64_t T, int64_t n_heads, int64_t n_kv_heads, int64_t pos0) {
    require_recording("matmul_qkv");
    if (T <= 0) return;
    switch (fused_qkv("matmul_qkv", q_out, k_out, v_out, x, wq, wk, wv, T, n_heads, n_kv_heads, pos0, false)) {
        case QkvPass::None:
            return Backend::matmul_qkv(q_out, k_out, v_out, x, wq, wk, wv, T, n_heads, n_kv_heads, pos0);
        case QkvPass::Qk: return matmul(v_out, x, wv, T);
        case QkvPass::Qkv: return;
    }
}

void VulkanBackend::matmul_qkv_f16(Buf q_out, Buf k_out, Buf v_out, Buf x, const TensorView& wq,
                                   const TensorView& wk, const TensorView& wv, int64_t T, int64_t n_heads,
                                   int64_t n_kv_heads, int64_t pos0, Buf k_scratch, Buf v_scratch) {
    require_recording("matmul_qkv_f16");
    if (T <= 0) return;
    switch (fused_qkv("matmul_qkv_f16", q_out, k_out, v_out, x, wq, wk, wv, T, n_heads, n_kv_heads, pos0, true)) {
        case QkvPass::None:
            return Backend::matmul_qkv_f16(q_out, k_out, v_out, x, wq, wk, wv, T, n_heads, n_kv_heads, pos0,
                                           k_scratch, v_scratch);
        case QkvPass::Qk: return matmul_store_f16(v_out, x, wv, T, 0, pos0, v_scratch);
        case QkvPass::Qkv: return;
    }
}

void VulkanBackend::matvec_qkv(Buf q_out, Buf k_out, Buf v_out, Buf x, const DeviceTensor& dq, const DeviceTensor& dk,
                               const DeviceTensor* dv, int64_t T, int64_t pos0, bool kv_f16) {
    // matvec's ROPE pass over wq's rows, then wk's, then (dv) wv's stored as they are, as one dispatch: each row
    // group is computed exactly as matmul_rope or matmul computes it alone (kv_f16: k's and v's rows rounded into
    // binary16 pairs as matmul_store_f16 writes them). The outputs are bound whole (the k and v rows move through
    // the cache every step), so the descriptor set stays the same from step to step.
    const int64_t K = dq.cols;
    const Epilogue e = kv_f16 ? (dv ? Epilogue::RopeQkvF16 : Epilogue::RopeQkF16)
                              : (dv ? Epilogue::RopeQkv : Epilogue::RopeQk);
    const int64_t per_word = kv_f16 ? 2 : 1;  // k's and v's elements per word of their outputs
    const uint32_t nt = matvec_tokens(T, e);
    const bool vec = matvec_vec_form(dq) && (x.offset % 4) == 0;
    const Kernel& k = matvec_kernel(dq.dtype, vec, nt, e);
    const int64_t half = config("matmul_qkv").head_dim / 2;
    ensure_rope_table(pos0 + T);
    const TableBinding table = bind_rope_table(pos0, T, half, "matmul_qkv");
    Binding bs[8] = {
        bind_weight(dq.chunks[0]),
        bind(x, 0, T * K, false, "matmul"),
        bind(q_out, 0, T * dq.rows, true, "matmul", true),
        table.binding,
        bind_weight(dk.chunks[0]),
        bind(k_out, 0, T * dk.rows / per_word, true, "matmul", true)};
    if (dv) {
        bs[6] = bind_weight(dv->chunks[0]);
        bs[7] = bind(v_out, 0, T * dv->rows / per_word, true, "matmul", true);
    }
    auto groups = [&](const DeviceTensor& d) {
        return u32(ceil_div(static_cast<uint64_t>(d.rows), tuning_.matvec_rows));
    };
    const uint32_t groups_q = groups(dq), groups_k = groups(dk), groups_v = dv ? groups(*dv) : 0;
    const MatvecQkvPush push{{u32(dq.rows), u32(K), u32(T), bs[1].first, bs[2].first, u32(dq.rows), groups_q, 0,
                              u32(half), table.first},
                             u32(dk.rows), groups_k, bs[5].first, u32(dk.rows),
                             dv ? u32(dv->rows) : 0, groups_v, dv ? bs[7].first : 0, dv ? u32(dv->rows) : 0};
    dispatch(k, std::span<const Binding>(bs, k.buffers()), &push,
             uint64_t(groups_q + groups_k + groups_v) * ceil_div(static_cast<uint64_t>(T), nt));
}

VulkanBackend::TableBinding VulkanBackend::bind_rope_table(int64_t pos, int64_t T, int64_t half, const char* op) {
    const int64_t table_floats = slots_[rope_table_].floats, row = pos * half * 2;
    const bool whole = table_floats <= max_binding_floats();
    const Binding b = bind(Buf{rope_table_, 0, 0}, whole ? 0 : row, whole ? table_floats : T * half * 2, false, op);
    return {b, b.first + u32(whole ? row : 0)};
}

// ---------------------------------------------------------------------------------------------- rope, attention

void VulkanBackend::rope(Buf x, int64_t T, int64_t n_heads, int64_t pos0) {
    require_recording("rope");
    const ModelConfig& c = config("rope");
    if (T <= 0) return;
    const int64_t half = c.head_dim / 2, row = n_heads * c.head_dim;
    ensure_rope_table(pos0 + T);
    const Kernel& k = kernel(kRope);
    const int64_t per = std::max<int64_t>(1, max_binding_floats() / row);
    // As in matvec's ROPE epilogue: the whole table (and x's whole buffer for a single dispatch), the positions
    // in the push constants, so that the descriptor set stays the same from step to step.
    for (int64_t t0 = 0; t0 < T; t0 += per) {
        const int64_t tc = std::min(per, T - t0);
        const TableBinding table = bind_rope_table(pos0 + t0, tc, half, "rope");
        const Binding bs[] = {bind(x, t0 * row, tc * row, true, "rope", per >= T), table.binding};
        const RopePush push{u32(tc), u32(n_heads * half), u32(half), bs[0].first, table.first};
        dispatch(k, bs, &push, ceil_div(static_cast<uint64_t>(tc * n_heads * half), kElementwiseWG));
    }
}

void VulkanBackend::store_f16(Buf dst, Buf src, int64_t n) {
    require_recording("store_f16");
    if (n % 2 != 0) throw Error("vulkan backend: store_f16 of an odd count " + std::to_string(n));
    const Kernel& k = kernel(kPackF16);
    // The cache bound whole (the new rows' offset a push constant): the same descriptor set at every position.
    const int64_t step = max_binding_floats() / 2 * 2;  // floats of src per dispatch: whole pairs
    for (int64_t i0 = 0; i0 < n; i0 += step) {
        const int64_t c = std::min(step, n - i0);
        const Binding bs[] = {bind(src, i0, c, false, "store_f16"), bind(dst, i0 / 2, c / 2, true, "store_f16", true)};
        const CopyPush push{u32(c / 2), bs[0].first, bs[1].first};
        dispatch(k, bs, &push, ceil_div(static_cast<uint64_t>(c / 2), kElementwiseWG));
    }
}

void VulkanBackend::prepare_f16_kv() {
    if (!model_) return;
    for (const KernelShape* s : {&kPackF16, &kAttentionF16, &kAttentionSplitF16, &kAttentionGroupedF16,
                                 &kAttentionGroupedSplitF16})
        kernel(*s);
    if (const FlashShape fs = flash_shape(model_->config); fs.lanes > 0) flash_kernel(fs, true);
    // The k and v products written straight into the cache (matmul_store_f16, matmul_qkv_f16), as
    // prepare_kernels builds the rest.
    if (!tuning_.fuse) return;
    for (const auto& [name, t] : model_->tensors) {
        if (name.ends_with("attention.wq")) {
            const DeviceTensor& d = device_tensor(t);
            if (const Epilogue e = qkv_form(*model_, name, true); e != Epilogue::Store) {
                matvec_kernel(d.dtype, matvec_vec_form(d), 1, e);
                if (tuning_.matvec_max_tokens >= 8)
                    matvec_kernel(d.dtype, matvec_vec_form(d), matvec_tokens(8, e), e);
            }
        }
        const bool wk = name.ends_with("attention.wk"), wv = name.ends_with("attention.wv");
        if (!wk && !wv) continue;
        const DeviceTensor& d = device_tensor(t);
        if (wk ? !rope_fusable(d, model_->config.n_kv_heads) : !pairs_fusable(d)) continue;
        const Epilogue e = wk ? Epilogue::RopeF16 : Epilogue::StoreF16;
        matvec_kernel(d.dtype, matvec_vec_form(d), 1, e);
        if (tuning_.matvec_max_tokens >= 8) matvec_kernel(d.dtype, matvec_vec_form(d), matvec_tokens(8, e), e);
    }
}

void VulkanBackend::attention(Buf out, Buf q, Buf k_cache, Buf v_cache, int64_t T, int64_t pos0, Buf probs) {
    attend(out, q, k_cache, v_cache, T, pos0, probs, false);
}

void VulkanBackend::attention_f16(Buf out, Buf q, Buf k_cache, Buf v_cache, int64_t T, int64_t pos0, Buf probs) {
    attend(out, q, k_cache, v_cache, T, pos0, probs, true);
}

void VulkanBackend::attend(Buf out, Buf q, Buf k_cache, Buf v_cache, int64_t T, int64_t pos0, Buf probs,
                           bool kv_f16) {
    require_recording("attention");
    const ModelConfig& c = config("attention");
    if (T <= 0) return;
    if (c.head_dim > kMaxHeadDim)
        throw UnsupportedError("vulkan backend: attention supports head_dim up to " + std::to_string(kMaxHeadDim) +
                               ", the model has " + std::to_string(c.head_dim));
    const int64_t q_dim = c.q_dim(), kv_dim = c.kv_dim(), L = pos0 + T, n_rep = c.n_rep();
    // The caches' whole buffers as descriptors (their first L rows as hazards): the same sets at every length.
    const int64_t cache_words = kv_f16 ? L * kv_dim / 2 : L * kv_dim;  // binary16: two to a word
    const Binding kb = bind(k_cache, 0, cache_words, false, "attention", true);
    const Binding vb = bind(v_cache, 0, cache_words, false, "attention", true);
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)));
    const int64_t per = std::max<int64_t>(1, max_binding_floats() / q_dim);  // queries per q/out binding

    // Without probabilities, the query heads of one KV head share a workgroup (attention_grouped.comp): qt
    // queries x n_rep heads as its rows, blocks of bk keys staged in shared memory.
    const bool grouped = tuning_.attention_grouped && !probs.valid() && n_rep <= kGroupedRows &&
                         n_rep * c.head_dim <= kGroupedRowFloats;
    const int64_t qt =
        grouped ? std::clamp<int64_t>(std::min(kGroupedRows / n_rep, kGroupedRowFloats / (n_rep * c.head_dim)), 1, T)
                : 1;
    const int64_t bk = std::min(kGroupedKeyFloats / (c.head_dim + 1), kGroupedWG / (qt * n_rep));
    // Workgroups per query block before any split: one per KV head (grouped) or per query head.
    const int64_t heads_per_group = grouped ? n_rep : 1;
    // Queries [t0, t0 + tc) of the T, read from qb, written to ob.
    auto shape_for = [&](int64_t t0, int64_t tc, const Binding& qb, const Binding& ob) {
        return AttentionShape{u32(tc),       u32(pos0 + t0), u32(c.n_heads), u32(n_rep), u32(c.head_dim),
                              u32(kv_dim),   qb.first,       kb.first,       vb.first,   ob.first};
    };
    auto grouped_push = [&](int64_t t0, int64_t tc, const Binding& qb, const Binding& ob) {
        GroupedAttentionPush push{};
        push.shape = shape_for(t0, tc, qb, ob);
        push.scale = scale;
        push.qt = u32(qt);
        push.bk = u32(bk);
        return push;
    };
    Binding none = bind(Buf{dummy_, 0, 0}, 0, 1, true, "attention");
    none.track = kUntracked;  // stands in for absent probs: nothing reads it, so it orders nothing
    const Binding pb = probs.valid() ? bind(probs, 0, c.n_heads * T * L, true, "attention") : none;
    // attention.comp's push constants.
    auto push_for = [&](int64_t t0, int64_t tc, const Binding& qb, const Binding& ob) {
        AttentionPush push{};
        push.shape = shape_for(t0, tc, qb, ob);
        push.p_first = pb.first;
        push.write_probs = probs.valid() ? 1u : 0u;
        push.scale = scale;
        push.p_T = u32(T);
        push.p_t0 = u32(t0);
        push.p_L = u32(L);
        return push;
    };

    if (!probs.valid() && T <= 4 && L >= tuning_.attention_split_from && T * q_dim <= max_binding_floats()) {
        // Decode over a long cache: a workgroup per head (or per KV head) would leave most of the GPU idle, so
        // the keys are split over enough workgroups to fill it, and the splits merged by a second dispatch.
        const int64_t groups = (T + qt - 1) / qt * (c.n_heads / heads_per_group);
        const int64_t wanted = std::max<int64_t>(1, (tuning_.attention_groups + groups - 1) / groups);
        int64_t split_keys = std::max(tuning_.attention_split_keys, (L + wanted - 1) / wanted);
        if (grouped) split_keys = (split_keys + bk - 1) / bk * bk;  // whole key blocks
        const int64_t n_splits = (L + split_keys - 1) / split_keys;
        const int64_t part_floats = T * c.n_heads * n_splits * (c.head_dim + 2);  // [T, n_heads, n_splits, hd + 2]
        const Buf parts = scratch(attention_scratch_, part_floats, "attention partial sums");
        const Binding qb = bind(q, 0, T * q_dim, false, "attention");
        const Binding partial = bind(parts, 0, part_floats, true, "attention");
        if (grouped) {
            GroupedAttentionPush push = grouped_push(0, T, qb, partial);
            push.n_splits = u32(n_splits);
            push.split_keys = u32(split_keys);
            const Binding bs[] = {qb, kb, vb, partial};
            dispatch(kernel(kv_f16 ? kAttentionGroupedSplitF16 : kAttentionGroupedSplit), bs, &push,
                     static_cast<uint64_t>(groups * n_splits));
        } else {
            AttentionPush push = push_for(0, T, qb, partial);
            push.n_splits = u32(n_splits);
            push.split_keys = u32(split_keys);
            const Binding bs[] = {qb, kb, vb, partial, none};
            dispatch(kernel(kv_f16 ? kAttentionSplitF16 : kAttentionSplit), bs, &push,
                     static_cast<uint64_t>(groups * n_splits));
        }
        Binding parts_in = partial;
        parts_in.write = false;
        const Binding cs[] = {parts_in, bind(out, 0, T * q_dim, true, "attention")};
        const CombinePush cpush{u32(T), u32(c.n_heads), u32(c.head_dim), u32(n_splits), parts_in.first, cs[1].first};
        dispatch(kernel(kAttentionCombine), cs, &cpush, static_cast<uint64_t>(T * c.n_heads));
        return;
    }

    // A prompt without probabilities: flash-attention tiles (attention_flash.comp) of WG / lanes rows.
    const FlashShape fs = flash_shape(c);
    const bool flash = !probs.valid() && fs.lanes > 0 && T >= tuning_.attention_flash_from;
    for (int64_t t0 = 0; t0 < T; t0 += per) {
        const int64_t tc = std::min(per, T - t0);
        const Binding qb = bind(q, t0 * q_dim, tc * q_dim, false, "attention");
        const Binding ob = bind(out, t0 * q_dim, tc * q_dim, true, "attention");
        if (flash) {
            const FlashAttentionPush push{shape_for(t0, tc, qb, ob), scale, u32(fs.queries)};
            const Binding bs[] = {qb, kb, vb, ob};
            dispatch(flash_kernel(fs, kv_f16), bs, &push,
                     ceil_div(static_cast<uint64_t>(tc), fs.queries) * c.n_kv_heads);
        } else if (grouped) {
            const GroupedAttentionPush push = grouped_push(t0, tc, qb, ob);
            const Binding bs[] = {qb, kb, vb, ob};
            dispatch(kernel(kv_f16 ? kAttentionGroupedF16 : kAttentionGrouped), bs, &push,
                     static_cast<uint64_t>((tc + qt - 1) / qt * c.n_kv_heads));
        } else {
            const AttentionPush push = push_for(t0, tc, qb, ob);
            const Binding bs[] = {qb, kb, vb, ob, pb};
            dispatch(kernel(kv_f16 ? kAttentionF16 : kAttention), bs, &push, static_cast<uint64_t>(tc * c.n_heads));
        }
    }
}

// ---------------------------------------------------------------------------------------------- results

Readback VulkanBackend::readback(Buf src, int64_t n) {
    require_recording("readback");
    Slot& s = slot(src, "readback");
    if (src.offset < 0 || n < 0 || src.offset + n > s.floats)
        throw Error("vulkan backend: readback: range [" + std::to_string(src.offset) + ", " +
                    std::to_string(src.offset + n) + ") outside buffer '" + s.name + "' of " +
                    std::to_string(s.floats) + " floats");
    Pending p;
    p.count = n;
    if (n > 0) {
        p.where = reserve(results_, static_cast<uint64_t>(n) * 4, "a readback page");
        // The copy is a transfer read of src: ordered against the dispatches around it like any other access.
        const Binding b{
            s.buffer.handle(), static_cast<uint64_t>(src.offset) * 4, static_cast<uint64_t>(n) * 4, 0, src.id, false};
        access(std::span<const Binding>(&b, 1));
        const VkBufferCopy region{static_cast<uint64_t>(src.offset) * 4, p.where.offset, static_cast<uint64_t>(n) * 4};
        vkCmdCopyBuffer(step_.cmd(), s.buffer.handle(), results_.pages[p.where.page].handle(), 1, &region);
    }
    pending_.push_back(p);
    return Readback{static_cast<uint32_t>(pending_.size() - 1)};
}

void VulkanBackend::topk_pass(const Binding& in, bool merge, uint32_t items, uint32_t k, const Binding& out,
                              uint32_t groups) {
    const Kernel& kern = kernel(merge ? kTopkMerge : kTopk, {tuning_.topk_workgroup});
    const Binding bs[] = {in, out};
    const TopkPush push{items, k, in.first, out.first};
    dispatch(kern, bs, &push, groups);
}

Readback VulkanBackend::topk(Buf row, int64_t n, int64_t k) {
    require_recording("topk");
    k = std::clamp<int64_t>(k, 0, n);
    if (k > kTopkMax || n > max_binding_floats()) {
        // Beyond the device kernel: bring the row back and rank it on the host after the step.
        const Readback r = readback(row, n);
        Pending& p = pending_[r.id];
        p.is_topk = true;
        p.host_topk = true;
        p.n = n;
        p.count = k;
        return r;
    }
    Pending p;
    p.is_topk = true;
    p.count = k;
    if (k > 0) {
        p.where = reserve(results_, static_cast<uint64_t>(k) * 8, "a top-k page");
        const Binding result = bind_host(results_, p.where, static_cast<uint64_t>(k) * 8, true);
        const uint64_t per_group = uint64_t(tuning_.topk_workgroup) * kTopkPerInvocation;
        uint32_t groups = u32(ceil_div(static_cast<uint64_t>(n), per_group));
        // Candidates of a pass: groups * k pairs; two halves of scratch, one written while the other is read.
        const int64_t half = static_cast<int64_t>(groups) * k * 2;  // in 32-bit words
        const Buf cands = scratch(topk_scratch_, 2 * half, "top-k scratch");
        Binding in = bind(row, 0, n, false, "topk");
        bool merge = false;
        uint32_t items = u32(n);
        int side = 0;
        for (;;) {
            if (groups == 1) {
                topk_pass(in, merge, items, u32(k), result, 1);
                break;
            }
            const Binding cand = bind(cands, side * half, static_cast<int64_t>(groups) * k * 2, true, "topk");
            topk_pass(in, merge, items, u32(k), cand, groups);
            in = cand;
            in.write = false;
            merge = true;
            items = groups * u32(k);
            groups = u32(ceil_div(items, per_group));
            side ^= 1;
        }
    }
    pending_.push_back(p);
    return Readback{static_cast<uint32_t>(pending_.size() - 1)};
}

}  // namespace strata::vk
