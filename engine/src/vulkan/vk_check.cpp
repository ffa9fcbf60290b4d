#include "vulkan/vk_check.hpp"

#include <cstdio>

#include "strata/error.hpp"

namespace strata::vk {

std::string result_name(VkResult r) {
    switch (r) {
#define STRATA_VK_RESULT(name) \
    case name: return #name;
        STRATA_VK_RESULT(VK_SUCCESS)
        STRATA_VK_RESULT(VK_NOT_READY)
        STRATA_VK_RESULT(VK_TIMEOUT)
        STRATA_VK_RESULT(VK_EVENT_SET)
        STRATA_VK_RESULT(VK_EVENT_RESET)
        STRATA_VK_RESULT(VK_INCOMPLETE)
        STRATA_VK_RESULT(VK_ERROR_OUT_OF_HOST_MEMORY)
        STRATA_VK_RESULT(VK_ERROR_OUT_OF_DEVICE_MEMORY)
        STRATA_VK_RESULT(VK_ERROR_INITIALIZATION_FAILED)
        STRATA_VK_RESULT(VK_ERROR_DEVICE_LOST)
        STRATA_VK_RESULT(VK_ERROR_MEMORY_MAP_FAILED)
        STRATA_VK_RESULT(VK_ERROR_LAYER_NOT_PRESENT)
        STRATA_VK_RESULT(VK_ERROR_EXTENSION_NOT_PRESENT)
        STRATA_VK_RESULT(VK_ERROR_FEATURE_NOT_PRESENT)
        STRATA_VK_RESULT(VK_ERROR_INCOMPATIBLE_DRIVER)
        STRATA_VK_RESULT(VK_ERROR_TOO_MANY_OBJECTS)
        STRATA_VK_RESULT(VK_ERROR_FORMAT_NOT_SUPPORTED)
        STRATA_VK_RESULT(VK_ERROR_FRAGMENTED_POOL)
        STRATA_VK_RESULT(VK_ERROR_UNKNOWN)
        STRATA_VK_RESULT(VK_ERROR_OUT_OF_POOL_MEMORY)
        STRATA_VK_RESULT(VK_ERROR_INVALID_EXTERNAL_HANDLE)
        STRATA_VK_RESULT(VK_ERROR_FRAGMENTATION)
        STRATA_VK_RESULT(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
        STRATA_VK_RESULT(VK_PIPELINE_COMPILE_REQUIRED)
#undef STRATA_VK_RESULT
        default: return "VkResult " + std::to_string(static_cast<int>(r));
    }
}

void check(VkResult r, std::string_view call) {
    if (r == VK_SUCCESS) return;
    if (r == VK_ERROR_DEVICE_LOST)
        throw DeviceLostError("the GPU was reset or stopped responding (VK_ERROR_DEVICE_LOST in " + std::string(call) +
                              "): reopen the model on the CPU backend, or open it on Vulkan again to retry");
    throw DeviceError(std::string(call) + " failed: " + result_name(r));
}


}  // namespace strata::vk
