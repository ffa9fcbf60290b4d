// The device's achievable read bandwidth: a read-only shader streams a buffer bigger than any cache, timed by
// GPU timestamps, so that bench can put the decode rate next to what the memory can deliver.
#include <algorithm>
#include <chrono>

#include "strata/error.hpp"
#include "vulkan/vk_check.hpp"
#include "vulkan/vulkan_backend.hpp"

namespace strata::vk {

VulkanBandwidth VulkanBackend::read_bandwidth(uint64_t bytes, int repeats) {
    if (step_.recording()) throw Error("vulkan backend: read bandwidth measured inside a step");
    if (bytes == 0) bytes = std::min<uint64_t>(1ull << 30, ctx_->info().memory / 8);
    // One binding covers the whole buffer, so the shader is a single plain stream.
    bytes = std::min<uint64_t>(bytes, ctx_->max_binding_range()) / 16 * 16;
    repeats = std::max(repeats, 1);
    Buffer data(*ctx_, bytes, Memory::DeviceLocal, "the bandwidth test buffer");
    Buffer sink(*ctx_, 16, Memory::DeviceLocal, "the bandwidth sink");
    const Kernel& k = kernel("read_bandwidth", 2, 4);
    const VkDescriptorSet set = one_off_set(k, {&data, &sink});
    const uint32_t quads = static_cast<uint32_t>(bytes / 16);
    const uint64_t groups = std::max<uint64_t>(1, (quads + 256ull * 16 - 1) / (256ull * 16));  // ~16 loads each
    const uint32_t gx = static_cast<uint32_t>(std::min<uint64_t>(groups, ctx_->max_groups_x()));
    const uint32_t gy = static_cast<uint32_t>((groups + gx - 1) / gx);

    double best = 0;
    for (int r = 0; r <= repeats; ++r) {  // run 0 warms up (first touch of the pages, pipeline caches)
        OneShot once(*ctx_);
        VkCommandBuffer cmd = once.cmd();
        if (r == 0) {
            vkCmdFillBuffer(cmd, data.handle(), 0, VK_WHOLE_SIZE, 0x5A5A5A5Au);
            // Guards: the fill (transfer write) against the shader reading the buffer.
            auto mb = make<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
            mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
            mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT;
            vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb,
                                 0, nullptr, 0, nullptr);
        }
        if (timestamps_) {
            vkCmdResetQueryPool(cmd, timestamps_, 0, 2);
            vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, timestamps_, 0);
        }
        vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k.pipeline());
        vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k.layout(), 0, 1, &set, 0, nullptr);
        vkCmdPushConstants(cmd, k.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, &quads);
        vkCmdDispatch(cmd, gx, gy, 1);
        if (timestamps_) vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, timestamps_, 1);
        const auto start = std::chrono::steady_clock::now();
        once.run();
        double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (timestamps_) {
            uint64_t t[2] = {0, 0};
            check(vkGetQueryPoolResults(ctx_->device(), timestamps_, 0, 2, sizeof t, t, sizeof(uint64_t),
                                        VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
                  "vkGetQueryPoolResults");
            seconds = double(t[1] - t[0]) * ctx_->timestamp_period_ns() * 1e-9;
        }
        if (r > 0 && seconds > 0 && (best == 0 || seconds < best)) best = seconds;
    }
    bound_pipeline_ = VK_NULL_HANDLE;
    VulkanBandwidth out;
    out.bytes = bytes;
    out.seconds = best;
    out.gb_per_s = best > 0 ? double(bytes) / best * 1e-9 : 0;
    return out;
}

}  // namespace strata::vk
