#pragma once
// What the Vulkan backend offers beyond the Backend interface: the devices this machine has (for
// `strata-cli devices` and the UI's device picker), the validation messages recorded so far (tests fail on any),
// and the device-side figures `strata-cli bench` reports (achievable read bandwidth, GPU time of a step).
// Only present in builds with STRATA_HAVE_VULKAN.
#include <cstdint>
#include <string>
#include <vector>

#include "strata/backend.hpp"

namespace strata {

struct VulkanDeviceInfo {
    int index = 0;                          // what --device N takes (the Vulkan enumeration order)
    std::string name;                       // "NVIDIA H200", "llvmpipe (LLVM 15.0.6, 256 bits)"
    std::string type;                       // "discrete", "integrated", "virtual", "cpu", "other"
    std::string driver;                     // "NVIDIA 580.159.4", "llvmpipe Mesa 22.3.6 (LLVM 15.0.6)"
    std::string api_version;                // the device's own Vulkan version, "1.3.230"
    uint64_t memory = 0;                    // bytes of the largest device-local heap
    uint64_t max_storage_buffer_range = 0;  // the largest range one binding may cover
    uint32_t subgroup_size = 0;
    uint32_t max_workgroup_invocations = 0;  // of a one-dimensional compute workgroup
    bool subgroup_shuffle = false;  // subgroupShuffleXor in compute shaders (flash-attention tiles for prompts)
    // VK_NV_cooperative_matrix with 16x16x16 binary16 -> float32 products, subgroups of 32: the prefill matmul
    // can run on matrix units (tensor cores; STRATA_VK_COOPMAT=1)
    bool cooperative_matrix = false;
    bool usable = false;          // has what Strata needs (Vulkan 1.2, a compute queue, subgroup arithmetic)
    std::string unusable_reason;  // what it lacks, when !usable
    bool chosen = false;          // the one picked when no --device is given
};

// Every Vulkan device, in the order --device counts them. Throws DeviceError when there is no Vulkan loader or
// driver at all.
std::vector<VulkanDeviceInfo> list_vulkan_devices();

// Validation-layer warnings and errors recorded in this process (the layer is on with BackendOptions::validation
// or STRATA_VK_VALIDATION=1). Tests fail when any was recorded.
std::vector<std::string> vulkan_validation_messages();
void clear_vulkan_validation_messages();

// The device's achievable streaming read bandwidth, measured on the backend's device by a read-only shader
// timed with GPU timestamps (best of `repeats`). bytes = 0 picks a size that defeats caches (1 GiB, less on
// small heaps). Throws Error when `backend` is not a Vulkan backend.
struct VulkanBandwidth {
    uint64_t bytes = 0;
    double seconds = 0;
    double gb_per_s = 0;  // 1e9 bytes per second
};
VulkanBandwidth vulkan_read_bandwidth(Backend& backend, uint64_t bytes = 0, int repeats = 5);

// GPU time of the last step (begin() .. submit()) from timestamps, in milliseconds; negative when the device
// has no timestamps or `backend` is not a Vulkan backend.
double vulkan_last_step_gpu_ms(const Backend& backend);

// What the last step cost besides the GPU's work: host time from begin() to submit() (recording the command
// buffers), the dispatches and barriers it recorded, and the GPU time as above. A step goes to the device in
// parts as it is recorded: `submissions` of them, the first after `first_submit_ms` of recording (until then
// the device waits for the host; after it, recording overlaps the device's work). Zeros for a non-Vulkan backend.
struct VulkanStepStats {
    double gpu_ms = -1;
    double record_ms = 0;
    double first_submit_ms = 0;
    int64_t dispatches = 0;
    int64_t barriers = 0;
    int64_t descriptor_writes = 0;  // sets written this step (the rest came from the cache)
    int64_t submissions = 0;
};
VulkanStepStats vulkan_last_step_stats(const Backend& backend);
// Where the backend's device buffers are: bytes in device-local memory, and bytes that went to host-visible
// memory because device-local memory was full; how many buffers there are and how many VkDeviceMemory
// allocations hold them (most share a few pooled blocks).
struct VulkanMemoryPlacement {
    uint64_t device_local_bytes = 0;
    uint64_t host_visible_bytes = 0;
    uint64_t buffers = 0;
    uint64_t allocations = 0;
};
VulkanMemoryPlacement vulkan_memory_placement(const Backend& backend);
// Compute pipelines the backend has built so far (at load, and any built on first use since).
size_t vulkan_pipelines_built(const Backend& backend);

}  // namespace strata
