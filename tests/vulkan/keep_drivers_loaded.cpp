// Keeps the Vulkan drivers loaded for the life of the test process. A driver allocates once, in its first
// vkCreateInstance (a pthread_once in the driver), and keeps that memory in a static of its own; when the last
// instance is destroyed the loader unloads the driver, the static goes with it, and LeakSanitizer reports the
// allocation as a leak in an "<unknown module>" (the unloaded library), which no suppression can name. An instance
// made at start and never destroyed keeps the drivers, and so that memory, reachable, as in a running Strata.
#include <vulkan/vulkan.h>

namespace {

struct KeepDriversLoaded {
    VkInstance instance = VK_NULL_HANDLE;
    KeepDriversLoaded() {
        VkApplicationInfo app{};
        app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
        app.apiVersion = VK_API_VERSION_1_1;
        VkInstanceCreateInfo ci{};
        ci.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
        ci.pApplicationInfo = &app;
        if (vkCreateInstance(&ci, nullptr, &instance) != VK_SUCCESS) instance = VK_NULL_HANDLE;  // no driver: nothing to keep
    }
};

// A static whose destructor does nothing: the instance outlives every test and is never destroyed.
[[maybe_unused]] const KeepDriversLoaded keep;

}  // namespace
