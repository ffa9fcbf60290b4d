// strata-cli devices: the Vulkan devices this machine has, as --device N counts them, and the one chosen by
// default (discrete > integrated > virtual > cpu), as JSON.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "strata/error.hpp"
#ifdef STRATA_HAVE_VULKAN
#include "strata/vulkan.hpp"
#endif

namespace strata::cli {
namespace {

int run_devices(const Args& args) {
    args.allow_only({});
#ifdef STRATA_HAVE_VULKAN
    nlohmann::json out = nlohmann::json::array();
    for (const VulkanDeviceInfo& d : list_vulkan_devices()) {
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
        out.push_back(std::move(j));
    }
    std::printf("%s\n", out.dump(2).c_str());
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
