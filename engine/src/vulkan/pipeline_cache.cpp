#include "vulkan/pipeline_cache.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <vector>

#include <unistd.h>

#include "vulkan/vk_check.hpp"

namespace strata::vk {

namespace {

constexpr char kMagic[8] = {'S', 'T', 'R', 'V', 'K', 'P', 'C', '1'};
constexpr size_t kOurHeader = 24;     // magic, payload bytes, FNV-1a of the payload
constexpr size_t kVulkanHeader = 32;  // VkPipelineCacheHeaderVersionOne

uint64_t fnv1a(const char* p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<unsigned char>(p[i])) * 1099511628211ull;
    return h;
}

uint32_t u32_at(const char* p) {
    uint32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

uint64_t u64_at(const char* p) {
    uint64_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

std::string file_name(const VkPhysicalDeviceProperties& p) {
    char head[64];
    std::snprintf(head, sizeof head, "vulkan-pipelines-%04x-%04x-", p.vendorID, p.deviceID);
    std::string name = head;
    for (uint8_t b : p.pipelineCacheUUID) {
        char hex[3];
        std::snprintf(hex, sizeof hex, "%02x", b);
        name += hex;
    }
    return name + ".bin";
}

// The file's bytes, or "" when it is missing, unreadable or bigger than kMaxBytes (then *why says so).
std::string read_file(const std::string& path, std::string* why) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) return {};
    if (size > PipelineCache::kMaxBytes) {
        *why = "ignored: " + std::to_string(size) + " bytes, more than a pipeline cache needs";
        return {};
    }
    std::ifstream in(path, std::ios::binary);
    std::string bytes(static_cast<size_t>(size), '\0');
    if (!in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()))) {
        *why = "ignored: could not be read";
        return {};
    }
    return bytes;
}

}  // namespace

std::string PipelineCache::default_folder() {
    if (const char* env = std::getenv("STRATA_VK_PIPELINE_CACHE"); env && *env)
        return std::string(env) == "off" ? std::string() : std::string(env);
    if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/strata";
    if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/strata";
    return {};
}

std::string PipelineCache::check_file(const std::string& bytes, const VkPhysicalDeviceProperties& properties) {
    if (bytes.size() < kOurHeader + kVulkanHeader) return "too short (" + std::to_string(bytes.size()) + " bytes)";
    if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) return "not a Strata pipeline cache";
    const uint64_t payload = u64_at(bytes.data() + 8);
    if (payload != bytes.size() - kOurHeader)
        return "truncated or extended (" + std::to_string(bytes.size() - kOurHeader) + " bytes of data, the header says " +
               std::to_string(payload) + ")";
    const char* data = bytes.data() + kOurHeader;
    if (fnv1a(data, payload) != u64_at(bytes.data() + 16)) return "its checksum does not match (changed on disk)";
    const uint32_t header_size = u32_at(data), version = u32_at(data + 4);
    if (header_size < kVulkanHeader || header_size > payload || version != VK_PIPELINE_CACHE_HEADER_VERSION_ONE)
        return "an unknown Vulkan pipeline-cache header";
    if (u32_at(data + 8) != properties.vendorID || u32_at(data + 12) != properties.deviceID ||
        std::memcmp(data + 16, properties.pipelineCacheUUID, VK_UUID_SIZE) != 0)
        return "written for another device or driver";
    return {};
}

PipelineCache::PipelineCache(VkDevice device, const VkPhysicalDeviceProperties& properties, const std::string& folder)
    : device_(device) {
    std::string initial;
    if (folder.empty()) {
        status_ = "off";
    } else {
        path_ = folder + "/" + file_name(properties);
        std::string why;
        const std::string bytes = read_file(path_, &why);
        if (!why.empty()) {
            status_ = why;
        } else if (bytes.empty()) {
            status_ = "empty (no file yet)";
        } else if (const std::string bad = check_file(bytes, properties); !bad.empty()) {
            status_ = "ignored: " + bad;
        } else {
            initial = bytes.substr(kOurHeader);
            status_ = "loaded " + std::to_string(initial.size()) + " bytes";
        }
    }
    auto ci = make<VkPipelineCacheCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO);
    ci.initialDataSize = initial.size();
    ci.pInitialData = initial.empty() ? nullptr : initial.data();
    if (vkCreatePipelineCache(device_, &ci, nullptr, &cache_) != VK_SUCCESS) {
        // The driver refused the data after all: start empty (pipelines are then compiled as without a cache).
        ci.initialDataSize = 0;
        ci.pInitialData = nullptr;
        status_ = "ignored: the driver refused it";
        if (vkCreatePipelineCache(device_, &ci, nullptr, &cache_) != VK_SUCCESS) {
            cache_ = VK_NULL_HANDLE;  // kernels are built without a cache
            status_ = "off: vkCreatePipelineCache failed";
        }
    }
    saved_size_ = initial.size();
}

PipelineCache::~PipelineCache() {
    if (!cache_) return;
    save();
    vkDestroyPipelineCache(device_, cache_, nullptr);
}

void PipelineCache::save() {
    if (!cache_ || path_.empty()) return;
    size_t n = 0;
    if (vkGetPipelineCacheData(device_, cache_, &n, nullptr) != VK_SUCCESS || n == 0 || n == saved_size_ ||
        n > kMaxBytes)
        return;
    std::string bytes(kOurHeader + n, '\0');
    if (vkGetPipelineCacheData(device_, cache_, &n, bytes.data() + kOurHeader) != VK_SUCCESS) return;
    bytes.resize(kOurHeader + n);
    const uint64_t payload = n, hash = fnv1a(bytes.data() + kOurHeader, n);
    std::memcpy(bytes.data(), kMagic, sizeof kMagic);
    std::memcpy(bytes.data() + 8, &payload, sizeof payload);
    std::memcpy(bytes.data() + 16, &hash, sizeof hash);

    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path_).parent_path(), ec);
    const std::string tmp = path_ + "." + std::to_string(::getpid()) + ".tmp";  // two processes may save at once
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()))) {
            std::filesystem::remove(tmp, ec);
            return;
        }
    }
    std::filesystem::rename(tmp, path_, ec);
    if (ec) {
        std::filesystem::remove(tmp, ec);
        return;
    }
    saved_size_ = n;
    status_ = "saved " + std::to_string(n) + " bytes";
}

}  // namespace strata::vk
