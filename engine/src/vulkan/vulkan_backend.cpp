// The Vulkan backend's machinery: buffers, bindings, hazard tracking, the step's command buffer, results.
// The ops themselves are in ops.cpp, weights and the RoPE table in weights.cpp.
#include "vulkan/vulkan_backend.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "strata/error.hpp"
#include "vulkan/vk_check.hpp"
#include "vulkan/vulkan_backend_factory.hpp"

namespace strata::vk {

namespace {

constexpr uint64_t kHostAlign = 256;  // >= every device's minStorageBufferOffsetAlignment (the spec's maximum)
constexpr uint32_t kProfiledDispatches = 16384;  // per step; later dispatches go unmeasured
// matmul.comp with TILE8 keeps two slices in shared memory: 2 x 16 depths x (17 + 33) vec4.
constexpr uint32_t kTile8SharedBytes = 2 * 16 * (17 + 33) * 16;

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// Storage buffers infos[0 .. n) at bindings 0 .. n-1 of set (n <= 8, the most any kernel binds).
void write_storage_set(VkDevice device, VkDescriptorSet set, const VkDescriptorBufferInfo* infos, size_t n) {
    VkWriteDescriptorSet writes[8];
    for (size_t i = 0; i < n; ++i) {
        writes[i] = make<VkWriteDescriptorSet>(VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET);
        writes[i].dstSet = set;
        writes[i].dstBinding = static_cast<uint32_t>(i);
        writes[i].descriptorCount = 1;
        writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        writes[i].pBufferInfo = &infos[i];
    }
    vkUpdateDescriptorSets(device, static_cast<uint32_t>(n), writes, 0, nullptr);
}

KernelTuning tuning_for(const VulkanDeviceInfo& device) {
    KernelTuning t;
    // Flash tiles need subgroup shuffles; a row's lanes (up to 8) lie within one subgroup.
    const bool flash_ok = device.subgroup_shuffle && device.subgroup_size > 0;
    t.attention_flash_lanes = std::min<uint32_t>(8, device.subgroup_size);
    if (!flash_ok) t.attention_flash_from = 0;
    t.norm_workgroup = std::min<uint32_t>(device.max_workgroup_invocations, 1024);
    if (device.type == "cpu") {
        t.norm_workgroup = 256;
        const uint32_t lanes = std::clamp<uint32_t>(device.subgroup_size, 1, 64);
        t.matvec_workgroup = lanes;
        t.matvec_rows = 4;
        // Prompts of 64 tokens or more in the float32 tiles at 8 x 8 per invocation: on lavapipe they beat the
        // matvec there (demo and 1B-shaped prompts of 64-256 tokens, docs/performance.md); shorter ones do not.
        t.matvec_max_tokens = 63;
        t.matmul_tile8 = true;
        t.topk_workgroup = lanes;
        // A few threads run the workgroups: split only long caches, in large pieces.
        t.attention_split_from = 1024;
        t.attention_split_keys = 256;
        t.attention_groups = 8;
        t.byte_float_bits = false;
        t.matvec_quad_lanes = false;
    }
    // STRATA_VK_MATVEC="WG,ROWS" overrides the matvec shape, so bench can compare shapes on one device.
    if (const char* e = std::getenv("STRATA_VK_MATVEC")) {
        unsigned wg = 0, rows = 0;
        if (std::sscanf(e, "%u,%u", &wg, &rows) == 2 && wg >= 1 && wg <= 1024 && (wg & (wg - 1)) == 0 && rows >= 1 &&
            rows <= 16) {
            t.matvec_workgroup = wg;
            t.matvec_rows = rows;
        }
    }
    if (const char* e = std::getenv("STRATA_VK_MATMUL_TILE8")) t.matmul_tile8 = std::string(e) == "1";
    if (const char* e = std::getenv("STRATA_VK_MATVEC_LOADS")) {
        const long long loads = std::atoll(e);
        if (loads >= 1 && loads <= 8) t.matvec_loads = static_cast<uint32_t>(loads);
    }
    if (const char* e = std::getenv("STRATA_VK_NORM_WG")) {
        const long long wg = std::atoll(e);
        if (wg >= 32 && wg <= device.max_workgroup_invocations && (wg & (wg - 1)) == 0)
            t.norm_workgroup = static_cast<uint32_t>(wg);
    }
    // STRATA_VK_TOPK_WG=N: the top-k workgroup size (tests run a GPU's shape on lavapipe).
    if (const char* e = std::getenv("STRATA_VK_TOPK_WG")) {
        const long long wg = std::atoll(e);
        if (wg >= 1 && wg <= 1024 && (wg & (wg - 1)) == 0) t.topk_workgroup = static_cast<uint32_t>(wg);
    }
    // STRATA_VK_ATTN_SPLIT_FROM=N[,KEYS,GROUPS]: split decode attention from N keys (tests), with at least KEYS
    // keys per split and about GROUPS workgroups (tests run a GPU's many small splits on lavapipe).
    if (const char* e = std::getenv("STRATA_VK_ATTN_SPLIT_FROM")) {
        long long from = 0, keys = 0, groups = 0;
        const int n = std::sscanf(e, "%lld,%lld,%lld", &from, &keys, &groups);
        if (n >= 1 && from >= 1) t.attention_split_from = from;
        if (n == 3 && keys >= 1 && keys <= (1 << 20) && groups >= 1 && groups <= (1 << 16)) {
            t.attention_split_keys = keys;
            t.attention_groups = groups;
        }
    }
    if (const char* e = std::getenv("STRATA_VK_SUBMIT")) {
        long long first = 0, most = 0;
        const int n = std::sscanf(e, "%lld,%lld", &first, &most);
        if (n >= 1 && first == 0) t.submit_first = 0;
        if (n == 2 && first >= 1 && most >= first) {
            t.submit_first = first;
            t.submit_most = most;
        }
    }
    if (const char* e = std::getenv("STRATA_VK_ATTN_GROUPED")) t.attention_grouped = std::string(e) != "0";
    // STRATA_VK_ATTN_FLASH_FROM=T[,LANES[,WG]]: flash tiles from T queries (0: never), with at most LANES lanes per
    // row (tests run the shapes of devices with smaller subgroups) and WG invocations per workgroup (a power of two
    // from 32 to the device's limit: a sweep on a GPU; tests run 256 and 512 on lavapipe).
    if (const char* e = std::getenv("STRATA_VK_ATTN_FLASH_FROM")) {
        long long from = -1, lanes = 0, wg = 0;
        const int n = std::sscanf(e, "%lld,%lld,%lld", &from, &lanes, &wg);
        if (n >= 1 && from >= 0 && flash_ok) t.attention_flash_from = from;
        if (n >= 2 && lanes >= 1 && lanes <= t.attention_flash_lanes && (lanes & (lanes - 1)) == 0)
            t.attention_flash_lanes = static_cast<uint32_t>(lanes);
        if (n == 3 && wg >= 32 && wg <= device.max_workgroup_invocations && (wg & (wg - 1)) == 0)
            t.attention_flash_wg = static_cast<uint32_t>(wg);
    }
    if (const char* e = std::getenv("STRATA_VK_FUSE")) t.fuse = std::string(e) != "0";
    if (const char* e = std::getenv("STRATA_VK_BYTE_FLOAT_BITS")) t.byte_float_bits = std::string(e) != "0";
    if (const char* e = std::getenv("STRATA_VK_QUAD_LANES"); e && (std::string(e) == "0" || std::string(e) == "1"))
        t.matvec_quad_lanes = std::string(e) == "1";
    // Matrix units (matmul_coopmat.comp) only when asked for: on the one GPU measured, an H200, that kernel ran
    // prompts slower than the float32 tiles (pp512 of an 8B model 1297-1704 against 1803-1815 tokens/s,
    // docs/performance.md), and it rounds x and w to binary16.
    if (const char* e = std::getenv("STRATA_VK_COOPMAT")) {
        if (std::string(e) == "0") t.prefill = KernelTuning::Prefill::Float32;
        if (std::string(e) == "1" && device.cooperative_matrix) t.prefill = KernelTuning::Prefill::Coopmat;
        if (std::string(e) == "emulated") t.prefill = KernelTuning::Prefill::Emulated;
    }
    // STRATA_VK_TILED_FROM=T: prompts of T tokens or more use the tiled matmul (tests reach it on lavapipe).
    if (const char* e = std::getenv("STRATA_VK_TILED_FROM")) {
        const long long from = std::atoll(e);
        if (from >= 2) t.matvec_max_tokens = from - 1;
    }
    return t;
}

}  // namespace

VulkanBackend::VulkanBackend(const BackendOptions& options) : options_(options) {
    ctx_ =
        std::make_unique<Context>(ContextOptions{options.device_index, options.validation, options.max_binding_range,
                                                 PipelineCache::default_folder(), options.device_local_limit});
    tuning_ = tuning_for(ctx_->info());
    if (tuning_.matmul_tile8 && ctx_->limits().maxComputeSharedMemorySize < kTile8SharedBytes)
        tuning_.matmul_tile8 = false;
    prefill_note_ = ctx_->coopmat_note();
    if (prefill_note_.empty() && ctx_->info().cooperative_matrix && tuning_.prefill == KernelTuning::Prefill::Float32)
        prefill_note_ = "matrix units on request (STRATA_VK_COOPMAT=1)";
    step_ = Sequence(*ctx_);
    descriptors_ = DescriptorArena(*ctx_);
    tokens_.memory = Memory::Upload;
    tokens_.page_bytes = 64 << 10;
    results_.memory = Memory::Readback;
    results_.page_bytes = 4 << 20;
    if (ctx_->has_timestamps()) {
        const char* prof = std::getenv("STRATA_VK_PROFILE");
        profiling_ = prof && std::string(prof) == "1";
        auto qci = make<VkQueryPoolCreateInfo>(VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO);
        qci.queryType = VK_QUERY_TYPE_TIMESTAMP;
        qci.queryCount = 2 + (profiling_ ? kProfiledDispatches : 0);
        check(vkCreateQueryPool(ctx_->device(), &qci, nullptr, &timestamps_), "vkCreateQueryPool");
    }
    // Bound in place of a buffer an op does not have (attention without probs); never read or written.
    dummy_ = new_slot(Buffer(*ctx_, 16, Memory::DeviceLocal, "placeholder buffer"), 4, "placeholder");
    // matvec's NORM tail counts its finished workgroups here; the last sets it back to 0.
    norm_count_ = alloc(1, "matvec NORM counter").id;
    // Matrix units are used only once they gave the right product here: a driver that builds the kernel but
    // computes it wrongly costs prompt speed, not garbage.
    if (tuning_.prefill != KernelTuning::Prefill::Float32) {
        std::string failed;
        try {
            failed = check_coopmat();
        } catch (const DeviceLostError&) {
            throw;
        } catch (const Error& e) {
            failed = e.what();
        }
        if (!failed.empty()) {
            prefill_note_ = "the cooperative-matrix kernel failed its check on this device (" + failed + ")";
            tuning_.prefill = KernelTuning::Prefill::Float32;
        }
    }
}

VulkanBackend::~VulkanBackend() {
    // A step abandoned by an exception may have left nothing in flight (submit waits), but be sure before
    // the members free memory the GPU could still read.
    vkDeviceWaitIdle(ctx_->device());
    if (profiling_) std::fprintf(stderr, "%s", profile_report().c_str());
    if (timestamps_) vkDestroyQueryPool(ctx_->device(), timestamps_, nullptr);
}

VkDescriptorSet VulkanBackend::one_off_set(const Kernel& k, std::initializer_list<const Buffer*> buffers) {
    forget_descriptor_sets();
    const VkDescriptorSet set = descriptors_.allocate(k.set_layout());
    std::vector<VkDescriptorBufferInfo> infos;
    for (const Buffer* b : buffers) infos.push_back({b->handle(), 0, b->size()});
    write_storage_set(ctx_->device(), set, infos.data(), infos.size());
    return set;
}

BackendInfo VulkanBackend::info() const {
    const VulkanDeviceInfo& d = ctx_->info();
    BackendInfo i;
    i.backend = "vulkan";
    i.device = d.name;
    i.device_type = d.type;
    if (d.type == "cpu" && d.name.find("llvmpipe") != std::string::npos) i.device_type = "cpu (lavapipe)";
    i.driver = d.driver + ", Vulkan " + d.api_version;
    switch (tuning_.prefill) {
        case KernelTuning::Prefill::Coopmat:
            i.kernels = "prefill matmul on matrix units (VK_NV_cooperative_matrix: binary16 operands, float32 sums)";
            break;
        case KernelTuning::Prefill::Emulated:
            i.kernels = "prefill matmul: the cooperative-matrix kernel emulated (binary16 operands, float32 FMAs)";
            break;
        case KernelTuning::Prefill::Float32:
            i.kernels = std::string("prefill matmul: float32 FMA tiles") +
                        (tuning_.matmul_tile8 ? " (8 x 8 per invocation)" : "") +
                        (prefill_note_.empty() ? "" : "; " + prefill_note_);
            break;
    }
    return i;
}

// ---------------------------------------------------------------------------------------------- buffers

uint32_t VulkanBackend::new_slot(Buffer buffer, int64_t floats, std::string name) {
    uint32_t id;
    if (!free_slots_.empty()) {
        id = free_slots_.back();
        free_slots_.pop_back();
    } else {
        id = static_cast<uint32_t>(slots_.size());
        slots_.emplace_back();
    }
    Slot& s = slots_[id];
    s.buffer = std::move(buffer);
    s.floats = floats;
    s.name = std::move(name);
    s.live = true;
    return id;
}

Buf VulkanBackend::alloc(int64_t n, std::string_view debug_name) {
    if (n < 0) throw Error("vulkan backend: negative size for buffer " + std::string(debug_name));
    Buffer buffer(*ctx_, static_cast<uint64_t>(n) * 4, Memory::DeviceLocal,
                  "buffer '" + std::string(debug_name) + "' (" + std::to_string(n) + " floats)");
    // Zeroed in a one-off submission, so it works inside or outside a step.
    OneShot once(*ctx_);
    vkCmdFillBuffer(once.cmd(), buffer.handle(), 0, VK_WHOLE_SIZE, 0);
    // Guards: the fill (transfer write) against every later shader or copy that reads or writes the buffer.
    auto mb = make<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
    mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                       VK_ACCESS_TRANSFER_WRITE_BIT;
    vkCmdPipelineBarrier(once.cmd(), VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, nullptr,
                         0, nullptr);
    once.run();
    return Buf{new_slot(std::move(buffer), n, std::string(debug_name)), 0, n};
}

void VulkanBackend::free(Buf b) {
    if (!b.valid() || b.id >= slots_.size() || !slots_[b.id].live || b.id == dummy_ || b.id == rope_table_ ||
        b.id == topk_scratch_ || b.id == attention_scratch_ || b.id == norm_count_)
        return;
    Slot& s = slots_[b.id];
    forget_descriptor_sets();
    // Commands recorded in this step may still use it: keep the memory until the step has run.
    if (step_.recording()) retired_.push_back(std::move(s.buffer));
    s.buffer = Buffer();
    s.live = false;
    s.floats = 0;
    free_slots_.push_back(b.id);
}

Buf VulkanBackend::scratch(uint32_t& id, int64_t floats, const char* name) {
    if (id == kUntracked || slots_[id].floats < floats) {
        Buffer buffer(*ctx_, static_cast<uint64_t>(floats) * 4, Memory::DeviceLocal, name);
        if (id == kUntracked) {
            id = new_slot(std::move(buffer), floats, name);
        } else {
            Slot& s = slots_[id];
            forget_descriptor_sets();
            // Commands already recorded in this step may still use the old one: keep it until the step has run.
            if (step_.recording()) retired_.push_back(std::move(s.buffer));
            s.buffer = std::move(buffer);
            s.floats = floats;
        }
    }
    return Buf{id, 0, floats};
}

VulkanBackend::Slot& VulkanBackend::slot(Buf b, const char* op) {
    if (!b.valid() || b.id >= slots_.size() || !slots_[b.id].live)
        throw Error(std::string("vulkan backend: ") + op + ": invalid buffer");
    return slots_[b.id];
}

int64_t VulkanBackend::max_binding_floats() const {
    return static_cast<int64_t>((ctx_->max_binding_range() - ctx_->offset_alignment()) / 4);
}

Binding VulkanBackend::bind(Buf b, int64_t first, int64_t count, bool write, const char* op, bool whole) {
    Slot& s = slot(b, op);
    const int64_t start = b.offset + first;
    if (b.offset < 0 || first < 0 || count < 0 || start + count > s.floats)
        throw Error(std::string("vulkan backend: ") + op + ": range [" + std::to_string(start) + ", " +
                    std::to_string(start + count) + ") outside buffer '" + s.name + "' of " + std::to_string(s.floats) +
                    " floats");
    const uint64_t byte0 = static_cast<uint64_t>(start) * 4;
    const uint64_t offset = byte0 / ctx_->offset_alignment() * ctx_->offset_alignment();
    const uint64_t range = byte0 + static_cast<uint64_t>(std::max<int64_t>(count, 1)) * 4 - offset;
    if (range > ctx_->max_binding_range())
        throw UnsupportedError(std::string("vulkan backend: ") + op + " would bind " + format_bytes(range) + " of '" +
                               s.name + "' at once; this device allows " + format_bytes(ctx_->max_binding_range()));
    Binding out{s.buffer.handle(),
                offset,
                std::min<uint64_t>(range, s.buffer.size() - offset),
                static_cast<uint32_t>((byte0 - offset) / 4),
                b.id,
                write};
    if (whole && s.buffer.size() <= ctx_->max_binding_range()) {
        out.set_offset = 0;
        out.set_range = s.buffer.size();
        out.first = static_cast<uint32_t>(start);
    }
    return out;
}

Binding VulkanBackend::bind_weight(const DeviceTensor::Chunk& c) const {
    return Binding{c.buffer.handle(), 0, c.buffer.size(), 0, kUntracked, false};
}

Binding VulkanBackend::bind_host(const HostArena& arena, HostSlice s, uint64_t bytes, bool write) const {
    return Binding{
        arena.pages[s.page].handle(), s.offset, align_up(std::max<uint64_t>(bytes, 4), 4), 0, kUntracked, write};
}

VulkanBackend::HostSlice VulkanBackend::reserve(HostArena& arena, uint64_t bytes, const char* what) {
    bytes = align_up(std::max<uint64_t>(bytes, 4), kHostAlign);
    while (arena.page < arena.pages.size() && arena.used + bytes > arena.pages[arena.page].size()) {
        ++arena.page;
        arena.used = 0;
    }
    if (arena.page == arena.pages.size())
        arena.pages.emplace_back(*ctx_, std::max(arena.page_bytes, bytes), arena.memory, what);
    HostSlice s{arena.page, arena.used};
    arena.used += bytes;
    return s;
}

// ---------------------------------------------------------------------------------------------- recording

const Kernel& VulkanBackend::kernel(std::string_view variant, uint32_t buffers, uint32_t push_bytes,
                                    std::initializer_list<uint32_t> constants) {
    // Key: the variant name, then the constants' bytes, in a stack buffer.
    char key[96];
    const size_t need = variant.size() + constants.size() * sizeof(uint32_t);
    if (need > sizeof key) throw Error("vulkan backend: kernel key too long for " + std::string(variant));
    std::memcpy(key, variant.data(), variant.size());
    size_t at = variant.size();
    for (uint32_t c : constants) {
        std::memcpy(key + at, &c, sizeof c);
        at += sizeof c;
    }
    const std::string_view k(key, at);
    auto it = kernels_.find(k);
    if (it == kernels_.end()) {
        KernelSpec spec{std::string(variant), buffers, push_bytes, std::vector<uint32_t>(constants)};
        it = kernels_.emplace(std::string(k), Kernel(*ctx_, spec)).first;
    }
    return it->second;
}

bool VulkanBackend::SetKey::operator==(const SetKey& o) const {
    if (layout != o.layout || count != o.count) return false;
    for (uint32_t i = 0; i < count; ++i)
        if (infos[i].buffer != o.infos[i].buffer || infos[i].offset != o.infos[i].offset ||
            infos[i].range != o.infos[i].range)
            return false;
    return true;
}

size_t VulkanBackend::SetKeyHash::operator()(const SetKey& k) const {
    // FNV-1a over the words that identify the set.
    uint64_t h = 1469598103934665603ull;
    auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    mix(reinterpret_cast<uint64_t>(k.layout));
    for (uint32_t i = 0; i < k.count; ++i) {
        mix(reinterpret_cast<uint64_t>(k.infos[i].buffer));
        mix(k.infos[i].offset);
        mix(k.infos[i].range);
    }
    return static_cast<size_t>(h);
}

void VulkanBackend::require_recording(const char* op) const {
    if (!step_.recording()) throw Error(std::string("vulkan backend: ") + op + " outside begin() .. submit()");
}

void VulkanBackend::barrier() {
    // Guards RAW (a shader or copy reading what an earlier dispatch or fill wrote), WAW and WAR (a dispatch
    // overwriting what an earlier one still reads or writes) between the commands of one step.
    auto mb = make<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                       VK_ACCESS_TRANSFER_WRITE_BIT;
    const VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    vkCmdPipelineBarrier(step_.cmd(), stages, stages, 0, 1, &mb, 0, nullptr, 0, nullptr);
    ++stats_.barriers;
    written_.clear();
    read_.clear();
}

void VulkanBackend::access(std::span<const Binding> bindings) {
    auto overlaps = [](const std::vector<Touched>& set, const Binding& b) {
        return std::any_of(set.begin(), set.end(), [&](const Touched& t) {
            return t.id == b.track && t.begin < b.offset + b.range && b.offset < t.end;
        });
    };
    bool conflict = false;
    for (const Binding& b : bindings) {
        if (b.track == kUntracked) continue;
        if (overlaps(written_, b) || (b.write && overlaps(read_, b))) conflict = true;
    }
    if (conflict) barrier();
    for (const Binding& b : bindings)
        if (b.track != kUntracked)
            (b.write ? written_ : read_).push_back(Touched{b.track, b.offset, b.offset + b.range});
}

void VulkanBackend::dispatch(const Kernel& k, std::span<const Binding> bindings, const void* push, uint64_t groups) {
    if (groups == 0) return;
    if (bindings.size() != k.buffers() || bindings.size() > 8)
        throw Error("vulkan backend: " + k.name() + " takes " + std::to_string(k.buffers()) + " buffers, got " +
                    std::to_string(bindings.size()));
    const uint64_t max_x = ctx_->max_groups_x();
    const uint64_t x = std::min<uint64_t>(groups, max_x);
    const uint64_t y = (groups + x - 1) / x;
    if (y > ctx_->max_groups_y())
        throw UnsupportedError("vulkan backend: " + k.name() + " needs " + std::to_string(groups) +
                               " workgroups, more than the device can launch at once");
    if (part_limit_ > 0 && part_dispatches_ >= part_limit_) submit_part();
    ++part_dispatches_;
    access(bindings);

    // The set for these exact ranges: cached from an earlier dispatch (of this step or one before) or new.
    SetKey key;
    key.layout = k.set_layout();
    key.count = static_cast<uint32_t>(bindings.size());
    VkDescriptorBufferInfo* infos = key.infos;
    for (size_t i = 0; i < bindings.size(); ++i) {
        const Binding& b = bindings[i];
        infos[i] = b.set_range ? VkDescriptorBufferInfo{b.buffer, b.set_offset, b.set_range}
                               : VkDescriptorBufferInfo{b.buffer, b.offset, b.range};
    }
    VkDescriptorSet& set = set_cache_[key];
    if (!set) {
        set = descriptors_.allocate(key.layout);
        write_storage_set(ctx_->device(), set, infos, bindings.size());
        ++stats_.descriptor_writes;
    }
    ++stats_.dispatches;
    VkCommandBuffer cmd = step_.cmd();
    if (bound_pipeline_ != k.pipeline()) {
        vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k.pipeline());
        bound_pipeline_ = k.pipeline();
    }
    vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k.layout(), 0, 1, &set, 0, nullptr);
    if (k.push_bytes()) vkCmdPushConstants(cmd, k.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, k.push_bytes(), push);
    // More workgroups than one grid dimension allows spill into y; shaders flatten (x, y) and skip the excess.
    vkCmdDispatch(cmd, static_cast<uint32_t>(x), static_cast<uint32_t>(y), 1);
    if (profiling_ && profiled_.size() < kProfiledDispatches) {
        vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, timestamps_,
                            2 + static_cast<uint32_t>(profiled_.size()));
        profiled_.push_back(k.name());
    }
}

// ---------------------------------------------------------------------------------------------- steps

void VulkanBackend::submit_part() {
    if (stats_.submissions == 0)
        stats_.first_submit_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - step_began_).count();
    try {
        step_.flush();
    } catch (const DeviceLostError&) {
        lost_ = true;
        throw;
    }
    ++stats_.submissions;
    part_dispatches_ = 0;
    part_limit_ = std::min(part_limit_ * 2, tuning_.submit_most);
    bound_pipeline_ = VK_NULL_HANDLE;  // a new command buffer has no state bound
    // No barrier here and the hazard tracking goes on: a pipeline barrier's scopes are every command earlier and
    // later in submission order on the queue, across command buffers and submissions, so the barriers the
    // tracker places order the parts as they order the commands of one buffer.
}

void VulkanBackend::begin() {
    if (lost_)
        throw DeviceLostError("the GPU was reset or stopped responding in an earlier step (VK_ERROR_DEVICE_LOST): "
                              "reopen the model on the CPU backend, or open it on Vulkan again to retry");
    step_began_ = std::chrono::steady_clock::now();
    stats_ = VulkanStepStats{};
    step_.begin();
    // The previous step has finished (submit waited), so its pages and freed buffers are free again.
    retired_.clear();
    for (HostArena* a : {&tokens_, &results_}) {
        // Keep the pages the last step used; a page beyond them was a one-off (a huge readback).
        if (a->pages.size() > a->page + 1) {
            a->pages.resize(a->page + 1);
            forget_descriptor_sets();
        }
        a->page = 0;
        a->used = 0;
    }
    // Cached sets that name destroyed buffers (or too many of them) go; nothing in flight uses them now.
    if (sets_stale_ || set_cache_.size() > 16384) {
        set_cache_.clear();
        descriptors_.reset();
        sets_stale_ = false;
    }
    pending_.clear();
    results_ready_ = false;
    written_.clear();
    read_.clear();
    bound_pipeline_ = VK_NULL_HANDLE;
    part_dispatches_ = 0;
    part_limit_ = tuning_.submit_first;
    profiled_.clear();
    if (timestamps_) {
        vkCmdResetQueryPool(step_.cmd(), timestamps_, 0, 2 + (profiling_ ? kProfiledDispatches : 0));
        vkCmdWriteTimestamp(step_.cmd(), VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, timestamps_, 0);
    }
    // The device-side half of the dependency on earlier submissions: the KV cache, the activations and the
    // copies an earlier step (or piece of a step) wrote are read or overwritten here. The fence the host waited
    // on orders them in time but makes their writes visible only to the host, so this barrier makes them
    // available and visible to this step's shaders and copies.
    barrier();  // the same full compute/transfer barrier the step uses between its own commands
}

void VulkanBackend::submit(const std::atomic<bool>* cancel) {
    require_recording("submit");
    // Guards: results that copies and shaders wrote into host-visible pages against the host reading them
    // once the fence has signalled.
    auto mb = make<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(step_.cmd(), VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
    if (timestamps_) vkCmdWriteTimestamp(step_.cmd(), VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, timestamps_, 1);
    stats_.record_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - step_began_).count();
    if (stats_.submissions == 0) stats_.first_submit_ms = stats_.record_ms;
    ++stats_.submissions;
    try {
        step_.submit_and_wait(cancel);
    } catch (const DeviceLostError&) {
        lost_ = true;
        throw;
    }
    retired_.clear();
    if (timestamps_) {
        uint64_t t[2] = {0, 0};
        check(vkGetQueryPoolResults(ctx_->device(), timestamps_, 0, 2, sizeof t, t, sizeof(uint64_t),
                                    VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
              "vkGetQueryPoolResults");
        last_step_ms_ = double(t[1] - t[0]) * ctx_->timestamp_period_ns() * 1e-6;
        if (!profiled_.empty()) {
            // Each dispatch's time is the gap since the timestamp before it (dispatches mostly run in order,
            // separated by barriers; overlapping ones share the time).
            std::vector<uint64_t> ts(profiled_.size());
            check(vkGetQueryPoolResults(ctx_->device(), timestamps_, 2, static_cast<uint32_t>(ts.size()),
                                        ts.size() * sizeof(uint64_t), ts.data(), sizeof(uint64_t),
                                        VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
                  "vkGetQueryPoolResults");
            uint64_t prev = t[0];
            for (size_t i = 0; i < ts.size(); ++i) {
                KernelTime& kt = profile_[profiled_[i]];
                kt.ms += double(ts[i] - std::min(prev, ts[i])) * ctx_->timestamp_period_ns() * 1e-6;
                kt.calls += 1;
                prev = std::max(prev, ts[i]);
            }
        }
    }
    for (Buffer& page : results_.pages) page.invalidate();
    results_ready_ = true;
    stats_.gpu_ms = last_step_ms_;
    last_stats_ = stats_;
}

std::string VulkanBackend::profile_report() const {
    std::vector<std::pair<std::string, KernelTime>> rows(profile_.begin(), profile_.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
    double total = 0;
    for (const auto& r : rows) total += r.second.ms;
    std::string out = "GPU time per kernel (" + ctx_->info().name + "):\n";
    char line[256];
    for (const auto& [name, kt] : rows) {
        std::snprintf(line, sizeof line, "  %-30s %8lld calls %12.3f ms %6.1f%% %10.1f us/call\n", name.c_str(),
                      static_cast<long long>(kt.calls), kt.ms, total > 0 ? 100.0 * kt.ms / total : 0.0,
                      kt.calls ? 1000.0 * kt.ms / double(kt.calls) : 0.0);
        out += line;
    }
    return out;
}

// ---------------------------------------------------------------------------------------------- results

std::vector<float> VulkanBackend::fetch(Readback r) {
    if (r.id >= pending_.size() || pending_[r.id].is_topk) throw Error("vulkan backend: fetch of an unknown readback");
    if (!results_ready_) throw Error("vulkan backend: fetch before submit()");
    const Pending& p = pending_[r.id];
    std::vector<float> out(static_cast<size_t>(p.count));
    if (p.count > 0)
        std::memcpy(out.data(), results_.pages[p.where.page].mapped() + p.where.offset, out.size() * sizeof(float));
    return out;
}

std::vector<TokenScore> VulkanBackend::topk_result(Readback r) {
    if (r.id >= pending_.size() || !pending_[r.id].is_topk)
        throw Error("vulkan backend: topk_result of an unknown top-k");
    if (!results_ready_) throw Error("vulkan backend: topk_result before submit()");
    const Pending& p = pending_[r.id];
    const std::byte* base =
        p.count > 0 || p.host_topk ? results_.pages[p.where.page].mapped() + p.where.offset : nullptr;
    std::vector<TokenScore> out;
    if (p.host_topk) {
        // k beyond the device kernel: the whole row came back; rank it as the CPU backend does.
        std::vector<float> row(static_cast<size_t>(p.n));
        std::memcpy(row.data(), base, row.size() * sizeof(float));
        std::vector<int32_t> ids(row.size());
        for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
        auto before = [&](int32_t a, int32_t b) {
            const float va = row[static_cast<size_t>(a)], vb = row[static_cast<size_t>(b)];
            const bool na = va != va, nb = vb != vb;
            if (na != nb) return nb;
            if (!na && va != vb) return va > vb;
            return a < b;
        };
        std::partial_sort(ids.begin(), ids.begin() + p.count, ids.end(), before);
        for (int64_t i = 0; i < p.count; ++i)
            out.push_back(
                TokenScore{ids[static_cast<size_t>(i)], row[static_cast<size_t>(ids[static_cast<size_t>(i)])]});
        return out;
    }
    for (int64_t i = 0; i < p.count; ++i) {
        uint32_t pair[2];
        std::memcpy(pair, base + i * 8, 8);
        if (pair[1] == UINT32_MAX) break;  // fewer candidates than k
        float v;
        std::memcpy(&v, &pair[0], 4);
        out.push_back(TokenScore{static_cast<int32_t>(pair[1]), v});
    }
    return out;
}

}  // namespace strata::vk

namespace strata {

std::unique_ptr<Backend> make_vulkan_backend(const BackendOptions& options) {
    return std::make_unique<vk::VulkanBackend>(options);
}

VulkanBandwidth vulkan_read_bandwidth(Backend& backend, uint64_t bytes, int repeats) {
    auto* vb = dynamic_cast<vk::VulkanBackend*>(&backend);
    if (!vb) throw Error("read bandwidth is measured on a Vulkan backend, not on " + backend.info().backend);
    return vb->read_bandwidth(bytes, repeats);
}

VulkanStepStats vulkan_last_step_stats(const Backend& backend) {
    const auto* vb = dynamic_cast<const vk::VulkanBackend*>(&backend);
    return vb ? vb->last_step_stats() : VulkanStepStats{};
}

VulkanMemoryPlacement vulkan_memory_placement(const Backend& backend) {
    auto* vb = dynamic_cast<const vk::VulkanBackend*>(&backend);
    if (!vb) return {};
    const vk::Context& ctx = const_cast<vk::VulkanBackend*>(vb)->context();
    return {ctx.allocated_bytes(), ctx.spilled_bytes(), ctx.buffers(), ctx.memory_objects()};
}

size_t vulkan_pipelines_built(const Backend& backend) {
    const auto* vb = dynamic_cast<const vk::VulkanBackend*>(&backend);
    return vb ? vb->kernels_built() : 0;
}

double vulkan_last_step_gpu_ms(const Backend& backend) {
    const auto* vb = dynamic_cast<const vk::VulkanBackend*>(&backend);
    return vb ? vb->last_step_gpu_ms() : -1.0;
}

}  // namespace strata
