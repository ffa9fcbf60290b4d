// The prefill matmul on matrix units is checked on the device before any prompt uses it. Its staging (loads,
// binary16 rounding, edges) is the emulated form's, which the tests run on every device; what only a device
// with matrix units runs (loading fragments from shared memory, their products, storing them) is checked here,
// once per backend: a product of small integers, exact in binary16 and in float32 sums whatever the order, over
// partial tiles of tokens and rows and three slices of depth, must come back exact.
#include <cstring>
#include <vector>

#include "vulkan/vk_check.hpp"
#include "vulkan/vulkan_backend.hpp"

namespace strata::vk {

std::string VulkanBackend::check_coopmat() {
    constexpr uint32_t T = 70, N = 136, K = 96;  // 2 x 2 tiles of 64 tokens x 128 rows, both partial; 3 slices
    std::vector<float> x(size_t(T) * K), w(size_t(N) * K);
    for (uint32_t t = 0; t < T; ++t)
        for (uint32_t k = 0; k < K; ++k) x[size_t(t) * K + k] = float(int((t * 7 + k * 3) % 5) - 2);
    for (uint32_t n = 0; n < N; ++n)
        for (uint32_t k = 0; k < K; ++k) w[size_t(n) * K + k] = float(int((n * 5 + k * 11) % 7) - 3);

    Buffer xb(*ctx_, x.size() * sizeof(float), Memory::Upload, "the cooperative-matrix check's x");
    Buffer wb(*ctx_, w.size() * sizeof(float), Memory::Upload, "the cooperative-matrix check's weights");
    Buffer ob(*ctx_, size_t(T) * N * sizeof(float), Memory::Readback, "the cooperative-matrix check's output");
    std::memcpy(xb.mapped(), x.data(), x.size() * sizeof(float));
    std::memcpy(wb.mapped(), w.data(), w.size() * sizeof(float));
    const Kernel& k = matmul_kernel(DType::F32);
    const VkDescriptorSet set = one_off_set(k, {&wb, &xb, &ob});
    const uint32_t tiles_n = (N + 127) / 128, tiles_t = (T + 63) / 64;
    const MatmulPush push{T, N, K, 0, 0, N, tiles_n};

    OneShot once(*ctx_);
    VkCommandBuffer cmd = once.cmd();
    vkCmdFillBuffer(cmd, ob.handle(), 0, VK_WHOLE_SIZE, 0x7FC00000u);  // NaN wherever the kernel writes nothing
    auto mb = make<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
    mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0,
                         nullptr, 0, nullptr);
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k.pipeline());
    vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k.layout(), 0, 1, &set, 0, nullptr);
    vkCmdPushConstants(cmd, k.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof push, &push);
    vkCmdDispatch(cmd, tiles_n * tiles_t, 1, 1);
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr,
                         0, nullptr);
    once.run();
    bound_pipeline_ = VK_NULL_HANDLE;
    ob.invalidate();

    std::vector<float> got(size_t(T) * N);
    std::memcpy(got.data(), ob.mapped(), got.size() * sizeof(float));
    int wrong = 0;
    std::string first;
    for (uint32_t t = 0; t < T; ++t)
        for (uint32_t n = 0; n < N; ++n) {
            float want = 0;
            for (uint32_t kk = 0; kk < K; ++kk) want += x[size_t(t) * K + kk] * w[size_t(n) * K + kk];
            const float g = got[size_t(t) * N + n];
            if (g == want) continue;
            if (wrong++ == 0)
                first = "token " + std::to_string(t) + ", row " + std::to_string(n) + ": " + std::to_string(g) +
                        " instead of " + std::to_string(want);
        }
    if (wrong == 0) return "";
    return std::to_string(wrong) + " of " + std::to_string(T * N) + " outputs wrong, first " + first;
}

}  // namespace strata::vk
