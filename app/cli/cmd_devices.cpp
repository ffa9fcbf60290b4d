// strata-cli devices: the Vulkan devices this machine has, as --device N counts them, and the one chosen by
// default (discrete > integrated > virtual > cpu), as JSON.
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "strata/error.hpp"
#ifdef STRATA_HAVE_VULKAN
#include "strata/vulkan.hpp"
#endif

namespace strata::cli {
namespace {

#ifdef STRATA_HAVE_VULKAN
// Said on stderr (stdout stays JSON) when there is nothing for --backend vulkan to run on.
void explain_no_device(const std::string& why) {
    std::fprintf(stderr,
                 "strata-cli: no usable Vulkan device: %s\n"
                 "  Strata runs on the CPU instead (--backend cpu, the default).\n"
                 "  For the GPU, install its Vulkan driver (Debian: mesa-vulkan-drivers for AMD, Intel and the CPU\n"
                 "  device lavapipe; the NVIDIA driver for NVIDIA); `vulkaninfo --summary` shows what the loader sees.\n",
                 why.c_str());
}
#endif

int run_devices(const Args& args) {
    args.allow_only({});
#ifdef STRATA_HAVE_VULKAN
    nlohmann::json out = nlohmann::json::array();
    std::vector<VulkanDeviceInfo> devices;
    try {
        devices = list_vulkan_devices();
    } catch (const DeviceError& e) {
        std::printf("%s\n", out.dump(2).c_str());
        explain_no_device(e.what());
        return 0;
    }
    bool any_usable = false;
    for (const VulkanDeviceInfo& d : devices) {
        nlohmann::json j = {
            {"index", d.index},
            {"name", d.name},
            {"type", d.type},
            {"driver", d.driver},
            {"api_version", d.api_version},
            {"memory", d.memory},
            {"max_storage_buffer_range", d.max_storage_buffer_range},
            {"subgroup_size", d.subgroup_size},
            {"usable", d.usable},
            {"chosen", d.chosen},
        };
        if (!d.usable) j["unusable_reason"] = d.unusable_reason;
        any_usable = any_usable || d.usable;
        out.push_back(std::move(j));
    }
    std::printf("%s\n", out.dump(2).c_str());
    if (devices.empty())
        explain_no_device("the Vulkan loader found no device (no driver installed, or VK_DRIVER_FILES / "
                          "VK_ICD_FILENAMES point nowhere)");
    else if (!any_usable)
        explain_no_device("none of the devices above has what Strata needs (see unusable_reason)");
    return 0;
#else
    throw UnsupportedError("this build of Strata has no Vulkan backend (configured with STRATA_BUILD_VULKAN=OFF)");
#endif
}

}  // namespace

STRATA_COMMAND(Command{"devices", "",
                       "list the Vulkan devices (index for --device, name, type, driver, API version, memory; "
                       "the default one is chosen) as JSON",
                       run_devices});

}  // namespace strata::cli
