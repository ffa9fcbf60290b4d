// Weights on the device: uploaded once through a bounded staging buffer, in canonical (Meta) row order and in
// their stored type (GGUF block types as their raw blocks, never dequantized), split by rows into chunks that each
// fit one binding. Also the RoPE cos/sin table.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "strata/error.hpp"
#include "strata/model.hpp"
#include "strata/quant.hpp"
#include "vulkan/vk_check.hpp"
#include "vulkan/vulkan_backend.hpp"

namespace strata::vk {

namespace {

// The staging buffer never exceeds this, whatever the model's size: host memory holds no second copy of
// the weights, only this window onto them.
constexpr uint64_t kStagingBytes = 256ull << 20;

// Copies bytes from host memory into device buffers through a staging buffer used as two halves: the host
// fills one half while the GPU copies out of the other.
class Uploader {
public:
    Uploader(Context& ctx, uint64_t total_bytes) : ctx_(&ctx) {
        half_ = std::min<uint64_t>(kStagingBytes / 2, std::max<uint64_t>(16, (total_bytes + 15) / 16 * 16));
        staging_ = Buffer(ctx, 2 * half_, Memory::Upload, "the weight staging buffer");
        seqs_[0] = Sequence(ctx);
        seqs_[1] = Sequence(ctx);
    }
    ~Uploader() {
        // Sequence's destructor waits for work in flight before the staging buffer goes away.
        seqs_[0] = Sequence();
        seqs_[1] = Sequence();
    }

    // Queues `bytes` from `src` for dst[dst_offset ..); flushes a half whenever it fills.
    void write(const std::byte* src, uint64_t bytes, VkBuffer dst, uint64_t dst_offset) {
        while (bytes > 0) {
            if (fill_ == half_) flush();
            const uint64_t n = std::min(bytes, half_ - fill_);
            const uint64_t at = current_ * half_ + fill_;
            std::memcpy(staging_.mapped() + at, src, n);
            if (!regions_.empty() && regions_.back().first == dst &&
                regions_.back().second.srcOffset + regions_.back().second.size == at &&
                regions_.back().second.dstOffset + regions_.back().second.size == dst_offset)
                regions_.back().second.size += n;  // continues the previous copy
            else
                regions_.push_back({dst, VkBufferCopy{at, dst_offset, n}});
            fill_ += n;
            src += n;
            dst_offset += n;
            bytes -= n;
        }
    }

    // Submits the filled half and switches to the other one (after its earlier copies have finished).
    void flush() {
        if (fill_ == 0) return;
        Sequence& seq = seqs_[current_];
        seq.begin();
        for (const auto& [dst, region] : regions_) vkCmdCopyBuffer(seq.cmd(), staging_.handle(), dst, 1, &region);
        // Guards: the copies (transfer writes) against the shaders and copies of later steps that read the weights.
        auto mb = make<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
        mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
        mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT;
        vkCmdPipelineBarrier(seq.cmd(), VK_PIPELINE_STAGE_TRANSFER_BIT,
                             VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0,
                             nullptr, 0, nullptr);
        seq.submit();
        regions_.clear();
        fill_ = 0;
        current_ ^= 1;
        seqs_[current_].wait();  // the half about to be refilled must have been copied out
    }

    void finish() {
        flush();
        seqs_[0].wait();
        seqs_[1].wait();
    }

private:
    Context* ctx_;
    Buffer staging_;
    Sequence seqs_[2];
    uint64_t half_ = 0, fill_ = 0;
    int current_ = 0;
    std::vector<std::pair<VkBuffer, VkBufferCopy>> regions_;
};

int64_t rows_of(const TensorView& t) { return t.shape.size() < 2 ? 1 : t.rows(); }

const std::string& display_name(const TensorView& t) { return t.name.empty() ? t.source_name : t.name; }

void check_supported(const TensorView& t) {
    if (!t.data || t.shape.empty() || t.shape.size() > 2)
        throw ModelError("weight " + display_name(t) + " has no data or is not a vector or matrix");
    // Block types are uploaded as their raw blocks; the shaders assume every row is whole blocks.
    if (dtype_is_block(t.dtype) && t.cols() % dtype_block_size(t.dtype) != 0)
        throw ModelError("weight " + display_name(t) + " is " + std::string(dtype_name(t.dtype)) + " with rows of " +
                         std::to_string(t.cols()) + " elements, not a multiple of its block size " +
                         std::to_string(dtype_block_size(t.dtype)));
    if (static_cast<uint64_t>(rows_of(t)) * t.row_bytes() > t.nbytes)
        throw ModelError("weight " + display_name(t) + " holds " + std::to_string(t.nbytes) +
                         " bytes, fewer than its shape needs");
}

}  // namespace

const DeviceTensor& VulkanBackend::device_tensor(const TensorView& w) {
    const TensorKey key{w.data, w.nbytes, static_cast<int>(w.dtype), w.rope_heads, rows_of(w), w.cols()};
    auto it = weights_.find(key);
    if (it != weights_.end()) return it->second;
    // A tensor the model did not hold at load() (op tests, or a caller's own weights): uploaded on first use.
    upload_tensors({&w}, LoadProgress{});
    return weights_.at(key);
}

void VulkanBackend::upload_tensors(const std::vector<const TensorView*>& tensors, const LoadProgress& progress) {
    uint64_t total = 0;
    for (const TensorView* t : tensors) {
        check_supported(*t);
        total += static_cast<uint64_t>(rows_of(*t)) * t->row_bytes();
    }
    Uploader up(*ctx_, total);
    uint64_t done = 0;
    int64_t count = 0;
    for (const TensorView* t : tensors) {
        if (progress.cancel && progress.cancel->load()) throw Cancelled();
        DeviceTensor d;
        d.name = display_name(*t);
        d.dtype = t->dtype;
        d.rows = rows_of(*t);
        d.cols = t->cols();
        d.row_bytes = t->row_bytes();
        // Chunks hold whole rows, so a block type's chunk boundary is always a block boundary. The binding range
        // is a multiple of 256, so the chunk's buffer (rounded up to 16 bytes) still fits one binding.
        const uint64_t per_chunk = ctx_->max_binding_range() / std::max<uint64_t>(d.row_bytes, 1);
        if (per_chunk == 0)
            throw UnsupportedError("weight " + d.name + ": one row takes " + format_bytes(d.row_bytes) +
                                   ", more than one binding may cover on this device (" +
                                   format_bytes(ctx_->max_binding_range()) + ")");
        const int64_t nchunks = (d.rows + static_cast<int64_t>(per_chunk) - 1) / static_cast<int64_t>(per_chunk);
        for (int64_t c = 0; c < nchunks; ++c) {
            DeviceTensor::Chunk chunk;
            chunk.row0 = c * static_cast<int64_t>(per_chunk);
            chunk.rows = std::min<int64_t>(static_cast<int64_t>(per_chunk), d.rows - chunk.row0);
            std::string what = "weight " + d.name;
            if (nchunks > 1)
                what += " (rows " + std::to_string(chunk.row0) + ".." + std::to_string(chunk.row0 + chunk.rows - 1) +
                        ", part " + std::to_string(c + 1) + " of " + std::to_string(nchunks) + ")";
            // Quantized blocks are checked once here (finite f16 scales, strata/quant.hpp): the shaders decode
            // without checks, and a malformed file fails at load naming the tensor, not as NaN logits later.
            if (dtype_is_block(d.dtype))
                quant::validate(d.dtype, t->data + static_cast<uint64_t>(chunk.row0) * d.row_bytes,
                                chunk.rows * d.cols,
                                what + (t->file.empty() ? "" : " in " + t->file));
            chunk.buffer = Buffer(*ctx_, static_cast<uint64_t>(chunk.rows) * d.row_bytes, Memory::DeviceLocal, what);
            // Canonical rows in order: physical_row undoes Hugging Face's q/k permutation while staging.
            if (t->rope_heads <= 0 || t->shape.size() < 2) {
                up.write(t->data + static_cast<uint64_t>(chunk.row0) * d.row_bytes,
                         static_cast<uint64_t>(chunk.rows) * d.row_bytes, chunk.buffer.handle(), 0);
            } else {
                for (int64_t r = 0; r < chunk.rows; ++r)
                    up.write(t->row_ptr(chunk.row0 + r), d.row_bytes, chunk.buffer.handle(),
                             static_cast<uint64_t>(r) * d.row_bytes);
            }
            d.chunks.push_back(std::move(chunk));
        }
        done += static_cast<uint64_t>(d.rows) * d.row_bytes;
        ++count;
        weights_[TensorKey{t->data, t->nbytes, static_cast<int>(t->dtype), t->rope_heads, d.rows, d.cols}] =
            std::move(d);
        if (progress.on_progress) progress.on_progress(done, total, count, static_cast<int64_t>(tensors.size()));
    }
    up.finish();
}

void VulkanBackend::load(const Model& model, const LoadProgress& progress) {
    model.config.validate();
    if (step_.recording()) throw Error("vulkan backend: load() inside a step");
    std::vector<const TensorView*> tensors;
    uint64_t total = 0;
    for (const auto& [name, t] : model.tensors) {
        check_supported(t);
        tensors.push_back(&t);
        total += static_cast<uint64_t>(rows_of(t)) * t.row_bytes();
    }
    // A whole model that cannot fit fails before the first byte moves, saying by how much.
    weights_.clear();
    forget_descriptor_sets();
    const uint64_t heap = ctx_->info().memory;
    // Weights beyond the device-local heap go to host-visible memory (Buffer), so only more than both refuse.
    const uint64_t host = ctx_->host_visible_heap();
    if (!ctx_->heap_is_advisory() && total + ctx_->allocated_bytes() + ctx_->spilled_bytes() > heap + host)
        throw DeviceError("out of device memory: the weights of " +
                          (model.config.name.empty() ? std::string("the model") : model.config.name) + " need " +
                          format_bytes(total) + " but " + ctx_->info().name + " has a " + format_bytes(heap) +
                          " device-local heap and " + format_bytes(host) + " of host-visible memory (" +
                          format_bytes(ctx_->allocated_bytes() + ctx_->spilled_bytes()) + " already in use)");
    model_ = nullptr;
    upload_tensors(tensors, progress);
    freqs_ = rope_frequencies(model.config, model.rope_freqs_factors);
    rope_positions_ = 0;
    model_ = &model;
    ensure_rope_table(std::min<int64_t>(model.config.max_seq_len, 8192));
    prepare_kernels(model);
    ctx_->pipeline_cache().save();  // a later run (or a crash before exit) finds them compiled
}

void VulkanBackend::ensure_rope_table(int64_t positions) {
    if (positions <= rope_positions_) return;
    if (rope_positions_ > 0) positions = std::max(positions, 2 * rope_positions_);  // grow geometrically
    const int64_t half = static_cast<int64_t>(freqs_.size());
    std::vector<float> table(static_cast<size_t>(positions * half * 2));  // [positions, head_dim/2, (cos, sin)]
    for (int64_t pos = 0; pos < positions; ++pos)
        for (int64_t i = 0; i < half; ++i) {
            // The angle in double, as the CPU backend computes it.
            const double angle = double(pos) * freqs_[static_cast<size_t>(i)];
            table[static_cast<size_t>((pos * half + i) * 2)] = static_cast<float>(std::cos(angle));
            table[static_cast<size_t>((pos * half + i) * 2 + 1)] = static_cast<float>(std::sin(angle));
        }
    Buffer buffer(*ctx_, table.size() * sizeof(float), Memory::DeviceLocal, "the RoPE cos/sin table");
    {
        Uploader up(*ctx_, table.size() * sizeof(float));
        up.write(reinterpret_cast<const std::byte*>(table.data()), table.size() * sizeof(float), buffer.handle(), 0);
        up.finish();
    }
    if (rope_table_ == kUntracked) {
        rope_table_ = new_slot(std::move(buffer), static_cast<int64_t>(table.size()), "rope table");
    } else {
        Slot& s = slots_[rope_table_];
        forget_descriptor_sets();
        // Commands already recorded in this step still read the old table: keep it until the step has run.
        if (step_.recording()) retired_.push_back(std::move(s.buffer));
        s.buffer = std::move(buffer);
        s.floats = static_cast<int64_t>(table.size());
    }
    rope_positions_ = positions;
}

}  // namespace strata::vk
