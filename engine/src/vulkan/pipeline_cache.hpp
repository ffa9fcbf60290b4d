#pragma once
// A VkPipelineCache kept on disk, so that the second run on a device does not compile its compute pipelines
// again (a driver's compiler can take seconds for the few dozen variants a model needs).
//
// Where: $STRATA_VK_PIPELINE_CACHE names the folder ("off" disables the cache), else $XDG_CACHE_HOME/strata,
// else $HOME/.cache/strata; the file is vulkan-pipelines-VENDOR-DEVICE-UUID.bin for the device's pipeline-cache
// UUID, so another driver or GPU never reads it.
// What: our header (magic, payload size, FNV-1a of the payload), then the driver's data. A file that is
// truncated, too big, changed, or whose Vulkan header names another device is not handed to the driver: the
// cache starts empty and a clean file replaces it when saved. Saving writes a temporary file and renames it.
// Nothing here throws for a cache problem: a cache is an optimisation, and its state is said by status().
#include <cstdint>
#include <string>

#include <vulkan/vulkan.h>

namespace strata::vk {

class PipelineCache {
public:
    static constexpr uint64_t kMaxBytes = 64ull << 20;  // a cache bigger than this is not read

    // folder empty: a cache in memory only (nothing read or written).
    PipelineCache(VkDevice device, const VkPhysicalDeviceProperties& properties, const std::string& folder);
    ~PipelineCache();
    PipelineCache(const PipelineCache&) = delete;
    PipelineCache& operator=(const PipelineCache&) = delete;

    VkPipelineCache handle() const { return cache_; }
    // Writes the driver's current data to the file (when there is a file and the data changed size).
    void save();
    const std::string& path() const { return path_; }
    // "off", "empty (no file yet)", "loaded N bytes", "ignored: REASON" and, after save(), "saved N bytes".
    const std::string& status() const { return status_; }

    // The folder the environment asks for, or "" when the cache is off.
    static std::string default_folder();
    // The checks a file's bytes must pass before the driver sees them: "" when they pass, else why not.
    static std::string check_file(const std::string& bytes, const VkPhysicalDeviceProperties& properties);

private:
    VkDevice device_ = VK_NULL_HANDLE;
    VkPipelineCache cache_ = VK_NULL_HANDLE;
    std::string path_;
    std::string status_;
    size_t saved_size_ = 0;
};

}  // namespace strata::vk
