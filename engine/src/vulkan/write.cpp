// Host-to-device writes recorded in the step (op tests, the logit lens over traced residuals).
#include <algorithm>
#include <string>

#include "strata/error.hpp"
#include "vulkan/vulkan_backend.hpp"

namespace strata::vk {

void VulkanBackend::write(Buf dst, std::span<const float> src) {
    require_recording("write");
    Slot& s = slot(dst, "write");
    const auto n = static_cast<int64_t>(src.size());
    if (dst.offset < 0 || n > dst.count || dst.offset + n > s.floats)
        throw Error("vulkan backend: write: " + std::to_string(n) + " floats at " + std::to_string(dst.offset) +
                    " do not fit buffer '" + s.name + "' of " + std::to_string(s.floats) + " floats");
    if (n == 0) return;
    // vkCmdUpdateBuffer copies the data into the command buffer when it is recorded (so `src` may go away at
    // once) and takes at most 65536 bytes per command; the writes are transfer writes, ordered against the
    // dispatches around them by the same byte-range tracking as any other access.
    const Binding b{s.buffer.handle(), static_cast<uint64_t>(dst.offset) * 4, static_cast<uint64_t>(n) * 4, 0, dst.id,
                    true};
    access(std::span<const Binding>(&b, 1));
    constexpr int64_t kChunk = 65536 / 4;
    for (int64_t i = 0; i < n; i += kChunk) {
        const int64_t m = std::min(kChunk, n - i);
        vkCmdUpdateBuffer(step_.cmd(), s.buffer.handle(), static_cast<uint64_t>(dst.offset + i) * 4,
                          static_cast<uint64_t>(m) * 4, src.data() + i);
    }
}

}  // namespace strata::vk
