#include "vulkan/resources.hpp"

#include <utility>

#include "strata/error.hpp"
#include "strata/shaders.hpp"
#include "vulkan/vk_check.hpp"

namespace strata::vk {

// ---------------------------------------------------------------- Buffer

Buffer::Buffer(Context& ctx, uint64_t bytes, Memory memory, const std::string& what) : ctx_(&ctx) {
    // Zero-sized buffers are invalid in Vulkan, and whole 16-byte words let shaders read vec4/uvec4.
    bytes = std::max<uint64_t>(16, (bytes + 15) / 16 * 16);
    if (bytes > ctx.max_allocation())
        throw DeviceError("out of device memory: " + what + " needs " + format_bytes(bytes) +
                          " in one buffer, and this device allows at most " + format_bytes(ctx.max_allocation()));
    auto bci = make<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
    bci.size = bytes;
    bci.usage =
        VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    check(vkCreateBuffer(ctx.device(), &bci, nullptr, &buffer_), "vkCreateBuffer (" + what + ")");
    size_ = bytes;

    VkMemoryRequirements req{};
    vkGetBufferMemoryRequirements(ctx.device(), buffer_, &req);
    VkMemoryPropertyFlags required = 0, preferred = 0, avoided = 0;
    switch (memory) {
        case Memory::DeviceLocal: required = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT; break;
        case Memory::Upload:
            required = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
            avoided = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;  // keep the small BAR window for what needs it
            break;
        case Memory::Readback:
            required = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT;
            preferred = VK_MEMORY_PROPERTY_HOST_CACHED_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
            avoided = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
            break;
    }
    const auto type = ctx.find_memory_type(req.memoryTypeBits, required, preferred, avoided);
    if (!type) {
        release();
        throw DeviceError("no suitable Vulkan memory type for " + what);
    }
    const uint64_t heap = ctx.device_local_limited() ? ctx.device_local_limit() : ctx.heap_size_of_type(*type);
    auto out_of_memory = [&](const std::string& why) {
        release();
        return DeviceError("out of device memory: " + what + " needs " + format_bytes(req.size) + " (" + why +
                           "; Strata already holds " + format_bytes(ctx.allocated_bytes()) + " of a " +
                           format_bytes(heap) + " heap" +
                           (ctx.spilled_bytes() ? " and " + format_bytes(ctx.spilled_bytes()) + " in host memory" : "") +
                           ")");
    };
    auto allocate = [&](uint32_t memory_type) {
        auto mai = make<VkMemoryAllocateInfo>(VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO);
        mai.allocationSize = req.size;
        mai.memoryTypeIndex = memory_type;
        return vkAllocateMemory(ctx.device(), &mai, nullptr, &memory_);
    };
    auto is_oom = [](VkResult r) { return r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY; };
    const bool checks_heap = ctx.device_local_limited() || !ctx.heap_is_advisory();
    auto fits = [&](uint64_t bytes) { return !checks_heap || bytes + ctx.allocated_bytes() <= heap; };
    if (memory == Memory::DeviceLocal) {
        // Most device buffers share the pool's blocks; a block that would not fit the heap is not made, and the
        // buffer then tries memory of its own (and host-visible memory after that) as before.
        if (const auto range = ctx.pool().allocate(req, *type, fits)) {
            pooled_ = *range;
            ctx.note_buffer(+1, false);
            const VkResult b = vkBindBufferMemory(ctx.device(), buffer_, pooled_.memory, pooled_.offset);
            if (b != VK_SUCCESS) {
                release();
                check(b, "vkBindBufferMemory (" + what + ")");
            }
            return;
        }
    }
    VkResult r = VK_ERROR_OUT_OF_DEVICE_MEMORY;
    if (memory != Memory::DeviceLocal || fits(req.size)) r = allocate(*type);
    if (memory == Memory::DeviceLocal && is_oom(r)) {
        // Device-local memory is full (a small carve-out, a full card): host-visible memory in its place, read
        // over the bus (on an integrated GPU the same RAM). Slower, but the model runs instead of refusing.
        const auto host = ctx.find_memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT, 0,
                                               VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
        if (!host) throw out_of_memory("it does not fit, and no host-visible memory type can hold it");
        r = allocate(*host);
        if (is_oom(r)) throw out_of_memory("it does not fit, nor in host-visible memory: vkAllocateMemory: " + result_name(r));
        if (r == VK_SUCCESS) {
            spilled_ = req.size;
            ctx.note_spilled(static_cast<int64_t>(req.size));
        }
    }
    if (is_oom(r)) throw out_of_memory("vkAllocateMemory: " + result_name(r));
    if (r != VK_SUCCESS) {
        release();
        check(r, "vkAllocateMemory (" + what + ")");
    }
    ctx.note_buffer(+1, true);
    if (memory == Memory::DeviceLocal && !spilled_) {  // the tally that out-of-memory messages quote
        ctx.note_allocated(req.size);
        allocation_ = req.size;
    }
    r = vkBindBufferMemory(ctx.device(), buffer_, memory_, 0);
    if (r != VK_SUCCESS) {
        release();
        check(r, "vkBindBufferMemory (" + what + ")");
    }
    if (memory != Memory::DeviceLocal) {
        void* p = nullptr;
        r = vkMapMemory(ctx.device(), memory_, 0, VK_WHOLE_SIZE, 0, &p);
        if (r != VK_SUCCESS) {
            release();
            check(r, "vkMapMemory (" + what + ")");
        }
        mapped_ = static_cast<std::byte*>(p);
        coherent_ = ctx.memory_properties().memoryTypes[*type].propertyFlags & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    }
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
    if (this != &o) {
        release();
        ctx_ = std::exchange(o.ctx_, nullptr);
        buffer_ = std::exchange(o.buffer_, VK_NULL_HANDLE);
        memory_ = std::exchange(o.memory_, VK_NULL_HANDLE);
        pooled_ = std::exchange(o.pooled_, MemoryPool::Range{});
        size_ = std::exchange(o.size_, 0);
        allocation_ = std::exchange(o.allocation_, 0);
        spilled_ = std::exchange(o.spilled_, 0);
        mapped_ = std::exchange(o.mapped_, nullptr);
        coherent_ = o.coherent_;
    }
    return *this;
}

void Buffer::invalidate() {
    if (coherent_ || !mapped_) return;
    auto range = make<VkMappedMemoryRange>(VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE);
    range.memory = memory_;
    range.offset = 0;
    range.size = VK_WHOLE_SIZE;
    check(vkInvalidateMappedMemoryRanges(ctx_->device(), 1, &range), "vkInvalidateMappedMemoryRanges");
}

void Buffer::release() {
    if (!ctx_) return;
    if (buffer_) vkDestroyBuffer(ctx_->device(), buffer_, nullptr);
    if (pooled_.memory) {
        ctx_->pool().free(pooled_);
        ctx_->note_buffer(-1, false);
    }
    if (memory_) {
        vkFreeMemory(ctx_->device(), memory_, nullptr);  // unmaps implicitly
        ctx_->note_freed(allocation_);
        ctx_->note_spilled(-static_cast<int64_t>(spilled_));
        ctx_->note_buffer(-1, true);
    }
    buffer_ = VK_NULL_HANDLE;
    memory_ = VK_NULL_HANDLE;
    pooled_ = MemoryPool::Range{};
    mapped_ = nullptr;
    size_ = allocation_ = spilled_ = 0;
}

// ---------------------------------------------------------------- Kernel

Kernel::Kernel(Context& ctx, const KernelSpec& spec)
    : device_(ctx.device()), buffers_(spec.buffers), push_bytes_(spec.push_bytes), name_(spec.variant) {
    const std::span<const uint32_t> spirv = shader_spirv(spec.variant);
    if (spirv.empty()) throw DeviceError("shader variant '" + spec.variant + "' is not embedded in this build");
    if (spec.push_bytes > ctx.limits().maxPushConstantsSize)
        throw DeviceError("shader " + spec.variant + " needs " + std::to_string(spec.push_bytes) +
                          " bytes of push constants; the device allows " +
                          std::to_string(ctx.limits().maxPushConstantsSize));
    try {
        auto smci = make<VkShaderModuleCreateInfo>(VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO);
        smci.codeSize = spirv.size_bytes();
        smci.pCode = spirv.data();
        check(vkCreateShaderModule(device_, &smci, nullptr, &module_), "vkCreateShaderModule (" + spec.variant + ")");

        std::vector<VkDescriptorSetLayoutBinding> bindings(spec.buffers);
        for (uint32_t i = 0; i < spec.buffers; ++i) {
            bindings[i].binding = i;
            bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
            bindings[i].descriptorCount = 1;
            bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
        }
        auto dslci = make<VkDescriptorSetLayoutCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO);
        dslci.bindingCount = spec.buffers;
        dslci.pBindings = bindings.data();
        check(vkCreateDescriptorSetLayout(device_, &dslci, nullptr, &set_layout_),
              "vkCreateDescriptorSetLayout (" + spec.variant + ")");

        VkPushConstantRange push{VK_SHADER_STAGE_COMPUTE_BIT, 0, spec.push_bytes};
        auto plci = make<VkPipelineLayoutCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO);
        plci.setLayoutCount = 1;
        plci.pSetLayouts = &set_layout_;
        plci.pushConstantRangeCount = spec.push_bytes ? 1 : 0;
        plci.pPushConstantRanges = &push;
        check(vkCreatePipelineLayout(device_, &plci, nullptr, &layout_),
              "vkCreatePipelineLayout (" + spec.variant + ")");

        std::vector<VkSpecializationMapEntry> entries(spec.constants.size());
        for (uint32_t i = 0; i < entries.size(); ++i) entries[i] = {i, i * 4u, 4u};
        VkSpecializationInfo si{};
        si.mapEntryCount = static_cast<uint32_t>(entries.size());
        si.pMapEntries = entries.data();
        si.dataSize = spec.constants.size() * 4;
        si.pData = spec.constants.data();

        auto cpci = make<VkComputePipelineCreateInfo>(VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO);
        cpci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
        cpci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
        cpci.stage.module = module_;
        cpci.stage.pName = "main";
        cpci.stage.pSpecializationInfo = entries.empty() ? nullptr : &si;
        cpci.layout = layout_;
        check(vkCreateComputePipelines(device_, ctx.pipeline_cache().handle(), 1, &cpci, nullptr, &pipeline_),
              "vkCreateComputePipelines (" + spec.variant + ")");
    } catch (...) {
        release();
        throw;
    }
}

Kernel& Kernel::operator=(Kernel&& o) noexcept {
    if (this != &o) {
        release();
        device_ = std::exchange(o.device_, VK_NULL_HANDLE);
        module_ = std::exchange(o.module_, VK_NULL_HANDLE);
        set_layout_ = std::exchange(o.set_layout_, VK_NULL_HANDLE);
        layout_ = std::exchange(o.layout_, VK_NULL_HANDLE);
        pipeline_ = std::exchange(o.pipeline_, VK_NULL_HANDLE);
        buffers_ = o.buffers_;
        push_bytes_ = o.push_bytes_;
        name_ = std::move(o.name_);
    }
    return *this;
}

void Kernel::release() {
    if (!device_) return;
    if (pipeline_) vkDestroyPipeline(device_, pipeline_, nullptr);
    if (layout_) vkDestroyPipelineLayout(device_, layout_, nullptr);
    if (set_layout_) vkDestroyDescriptorSetLayout(device_, set_layout_, nullptr);
    if (module_) vkDestroyShaderModule(device_, module_, nullptr);
    pipeline_ = VK_NULL_HANDLE;
    layout_ = VK_NULL_HANDLE;
    set_layout_ = VK_NULL_HANDLE;
    module_ = VK_NULL_HANDLE;
    device_ = VK_NULL_HANDLE;
}

// ---------------------------------------------------------------- Sequence

Sequence::Sequence(Context& ctx) : ctx_(&ctx) {
    cmds_.reserve(8);
    fences_.reserve(8);
    add_buffer();
}

void Sequence::add_buffer() {
    auto cbai = make<VkCommandBufferAllocateInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
    cbai.commandPool = ctx_->command_pool();
    cbai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    cbai.commandBufferCount = 1;
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    check(vkAllocateCommandBuffers(ctx_->device(), &cbai, &cmd), "vkAllocateCommandBuffers");
    auto fci = make<VkFenceCreateInfo>(VK_STRUCTURE_TYPE_FENCE_CREATE_INFO);
    VkFence fence = VK_NULL_HANDLE;
    const VkResult r = vkCreateFence(ctx_->device(), &fci, nullptr, &fence);
    if (r != VK_SUCCESS) {
        vkFreeCommandBuffers(ctx_->device(), ctx_->command_pool(), 1, &cmd);
        check(r, "vkCreateFence");
    }
    cmds_.push_back(cmd);
    fences_.push_back(fence);
}

Sequence& Sequence::operator=(Sequence&& o) noexcept {
    if (this != &o) {
        release();
        ctx_ = std::exchange(o.ctx_, nullptr);
        cmds_ = std::exchange(o.cmds_, {});
        fences_ = std::exchange(o.fences_, {});
        current_ = std::exchange(o.current_, 0);
        waited_ = std::exchange(o.waited_, 0);
        submitted_ = std::exchange(o.submitted_, 0);
        recording_ = std::exchange(o.recording_, false);
    }
    return *this;
}

void Sequence::begin() {
    wait();  // a step abandoned by a cancelled wait may still run: its command buffers cannot be reset before
    if (recording_) {
        // A step abandoned by an exception: close and discard what it recorded.
        vkEndCommandBuffer(cmds_[current_]);
        check(vkResetCommandBuffer(cmds_[current_], 0), "vkResetCommandBuffer");
        recording_ = false;
    }
    current_ = waited_ = submitted_ = 0;
    auto bi = make<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    check(vkBeginCommandBuffer(cmds_[0], &bi), "vkBeginCommandBuffer");
    recording_ = true;
}

void Sequence::submit_current() {
    recording_ = false;
    check(vkEndCommandBuffer(cmds_[current_]), "vkEndCommandBuffer");
    auto si = make<VkSubmitInfo>(VK_STRUCTURE_TYPE_SUBMIT_INFO);
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cmds_[current_];
    check(vkQueueSubmit(ctx_->queue(), 1, &si, fences_[current_]), "vkQueueSubmit");
    submitted_ = current_ + 1;
}

void Sequence::flush() {
    submit_current();
    ++current_;
    if (current_ == cmds_.size()) add_buffer();
    auto bi = make<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    check(vkBeginCommandBuffer(cmds_[current_], &bi), "vkBeginCommandBuffer");
    recording_ = true;
}

void Sequence::submit() { submit_current(); }

void Sequence::wait(const std::atomic<bool>* cancel) {
    const auto start = std::chrono::steady_clock::now();
    const auto slice = static_cast<uint64_t>(std::chrono::nanoseconds(kWaitSlice).count());
    while (waited_ < submitted_) {
        // Checked before every fence, not only when one times out: a step sent in parts that each finish
        // within a slice would otherwise run to its end.
        if (cancel && cancel->load()) throw Cancelled();
        VkFence& fence = fences_[waited_];
        const VkResult r = vkWaitForFences(ctx_->device(), 1, &fence, VK_TRUE, slice);
        if (r == VK_SUCCESS) {
            ++waited_;
            check(vkResetFences(ctx_->device(), 1, &fence), "vkResetFences");
            continue;
        }
        if (r != VK_TIMEOUT) {
            waited_ = submitted_;  // a lost device signals nothing any more
            check(r, "vkWaitForFences");
        }
        if (std::chrono::steady_clock::now() - start > kWaitLimit)
            throw DeviceError("the GPU has not finished a step in " + std::to_string(kWaitLimit.count()) +
                              " s: the device or its driver may be hung (reopen the model on the CPU backend)");
    }
}

void Sequence::release() {
    if (!ctx_) return;
    // The command buffers may not be freed while the GPU still runs them.
    for (size_t i = waited_; i < submitted_; ++i) vkWaitForFences(ctx_->device(), 1, &fences_[i], VK_TRUE, UINT64_MAX);
    waited_ = submitted_ = 0;
    for (VkFence f : fences_) vkDestroyFence(ctx_->device(), f, nullptr);
    if (!cmds_.empty())
        vkFreeCommandBuffers(ctx_->device(), ctx_->command_pool(), static_cast<uint32_t>(cmds_.size()), cmds_.data());
    fences_.clear();
    cmds_.clear();
    ctx_ = nullptr;
}

// ---------------------------------------------------------------- DescriptorArena

namespace {
constexpr uint32_t kSetsPerPool = 1024;
constexpr uint32_t kBuffersPerSet = 8;
}  // namespace

DescriptorArena& DescriptorArena::operator=(DescriptorArena&& o) noexcept {
    if (this != &o) {
        release();
        ctx_ = std::exchange(o.ctx_, nullptr);
        pools_ = std::move(o.pools_);
        o.pools_.clear();
        current_ = std::exchange(o.current_, 0);
    }
    return *this;
}

void DescriptorArena::add_pool() {
    VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kSetsPerPool * kBuffersPerSet};
    auto ci = make<VkDescriptorPoolCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO);
    ci.maxSets = kSetsPerPool;
    ci.poolSizeCount = 1;
    ci.pPoolSizes = &size;
    VkDescriptorPool pool = VK_NULL_HANDLE;
    check(vkCreateDescriptorPool(ctx_->device(), &ci, nullptr, &pool), "vkCreateDescriptorPool");
    pools_.push_back(pool);
}

VkDescriptorSet DescriptorArena::allocate(VkDescriptorSetLayout layout) {
    for (;;) {
        if (current_ == pools_.size()) add_pool();
        auto ai = make<VkDescriptorSetAllocateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO);
        ai.descriptorPool = pools_[current_];
        ai.descriptorSetCount = 1;
        ai.pSetLayouts = &layout;
        VkDescriptorSet set = VK_NULL_HANDLE;
        VkResult r = vkAllocateDescriptorSets(ctx_->device(), &ai, &set);
        if (r == VK_SUCCESS) return set;
        // This pool is full: the step continues in the next one.
        if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL) check(r, "vkAllocateDescriptorSets");
        ++current_;
    }
}

void DescriptorArena::reset() {
    for (size_t i = 0; i < pools_.size() && i <= current_; ++i)
        check(vkResetDescriptorPool(ctx_->device(), pools_[i], 0), "vkResetDescriptorPool");
    current_ = 0;
}

void DescriptorArena::release() {
    if (!ctx_) return;
    for (VkDescriptorPool p : pools_) vkDestroyDescriptorPool(ctx_->device(), p, nullptr);
    pools_.clear();
    current_ = 0;
}

}  // namespace strata::vk
