#pragma once
// Every Vulkan call's VkResult goes through check(): a failure becomes a strata::DeviceError that names the call
// and the result, so "vkAllocateMemory failed: VK_ERROR_OUT_OF_DEVICE_MEMORY" reaches the user instead of a crash.
#include <string>
#include <string_view>

#include <vulkan/vulkan.h>

#include "strata/host_memory.hpp"

namespace strata::vk {

// "VK_ERROR_OUT_OF_DEVICE_MEMORY", or "VkResult -13" for codes this build does not know.
std::string result_name(VkResult r);

// Throws DeviceError("<call> failed: <result>") unless r is VK_SUCCESS (or VK_INCOMPLETE when allowed).
void check(VkResult r, std::string_view call);

// A Vulkan struct with every field zero and its sType set: auto ci = make<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_...).
template <class T>
T make(VkStructureType type) {
    T t{};
    t.sType = type;
    return t;
}

// Sizes in error messages and device listings.
using strata::format_bytes;

}  // namespace strata::vk
