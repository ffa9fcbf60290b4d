#include "vulkan/context.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>

#include "strata/error.hpp"
#include "vulkan/vk_check.hpp"

namespace strata {

namespace {
// Every validation message of the process, whichever context produced it: tests assert this stays empty.
std::mutex g_messages_mutex;
std::vector<std::string> g_messages;

VKAPI_ATTR VkBool32 VKAPI_CALL record_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                              VkDebugUtilsMessageTypeFlagsEXT /*types*/,
                                              const VkDebugUtilsMessengerCallbackDataEXT* data, void* /*user*/) {
    // Info and verbose messages are the loader's chatter; warnings and errors are what the layer finds.
    if (severity < VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) return VK_FALSE;
    std::string text = severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? "error: " : "warning: ";
    if (data && data->pMessageIdName) text += std::string("[") + data->pMessageIdName + "] ";
    if (data && data->pMessage) text += data->pMessage;
    std::lock_guard<std::mutex> lock(g_messages_mutex);
    g_messages.push_back(std::move(text));
    return VK_FALSE;  // never abort the call: the test reports the message instead
}
}  // namespace

std::vector<std::string> vulkan_validation_messages() {
    std::lock_guard<std::mutex> lock(g_messages_mutex);
    return g_messages;
}

void clear_vulkan_validation_messages() {
    std::lock_guard<std::mutex> lock(g_messages_mutex);
    g_messages.clear();
}

}  // namespace strata

namespace strata::vk {

namespace {

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

std::string version_string(uint32_t v) {
    return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) + "." +
           std::to_string(VK_API_VERSION_PATCH(v));
}

std::string type_name(VkPhysicalDeviceType t) {
    switch (t) {
        case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
        case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
        case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
        case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
        default: return "other";
    }
}

int type_score(const std::string& type) {
    if (type == "discrete") return 4;
    if (type == "integrated") return 3;
    if (type == "virtual") return 2;
    if (type == "cpu") return 1;
    return 0;
}

// Vendors encode driverVersion their own way; NVIDIA's is 10.8.8.6 bits.
std::string driver_version_string(const VkPhysicalDeviceProperties& p) {
    const uint32_t v = p.driverVersion;
    if (p.vendorID == 0x10DE)
        return std::to_string(v >> 22) + "." + std::to_string((v >> 14) & 0xff) + "." + std::to_string((v >> 6) & 0xff);
    return version_string(v);
}

bool env_on(const char* name) {
    const char* e = std::getenv(name);
    if (!e) return false;
    std::string_view s(e);
    return s == "1" || s == "true" || s == "on" || s == "yes";
}

}  // namespace

bool validation_from_env() { return env_on("STRATA_VK_VALIDATION"); }

Instance::Instance(bool validation) {
    uint32_t api = VK_API_VERSION_1_0;
    auto enumerate_version = reinterpret_cast<PFN_vkEnumerateInstanceVersion>(
        vkGetInstanceProcAddr(VK_NULL_HANDLE, "vkEnumerateInstanceVersion"));
    if (enumerate_version) check(enumerate_version(&api), "vkEnumerateInstanceVersion");
    if (api < VK_API_VERSION_1_2)
        throw DeviceError("the Vulkan loader offers version " + version_string(api) +
                          "; Strata needs Vulkan 1.2 (update libvulkan1)");

    std::vector<const char*> layers, extensions;
    if (validation) {
        uint32_t n = 0;
        check(vkEnumerateInstanceLayerProperties(&n, nullptr), "vkEnumerateInstanceLayerProperties");
        std::vector<VkLayerProperties> props(n);
        check(vkEnumerateInstanceLayerProperties(&n, props.data()), "vkEnumerateInstanceLayerProperties");
        const bool found = std::any_of(props.begin(), props.end(), [](const VkLayerProperties& p) {
            return std::strcmp(p.layerName, kValidationLayer) == 0;
        });
        if (!found)
            throw DeviceError(std::string("validation was requested (STRATA_VK_VALIDATION=1) but ") + kValidationLayer +
                              " is not installed (Debian: vulkan-validationlayers)");
        layers.push_back(kValidationLayer);
        extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    }

    auto app = make<VkApplicationInfo>(VK_STRUCTURE_TYPE_APPLICATION_INFO);
    app.pApplicationName = "strata";
    app.applicationVersion = VK_MAKE_API_VERSION(0, 0, 1, 0);
    app.pEngineName = "strata";
    app.apiVersion = VK_API_VERSION_1_2;

    auto messenger_info =
        make<VkDebugUtilsMessengerCreateInfoEXT>(VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT);
    messenger_info.messageSeverity =
        VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    messenger_info.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                                 VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                                 VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    messenger_info.pfnUserCallback = record_message;

    // Synchronization validation checks every barrier against the hazards it is meant to guard; it is slow,
    // so it is on only when STRATA_VK_SYNC_VALIDATION=1 asks for it as well.
    VkValidationFeatureEnableEXT sync = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
    auto features = make<VkValidationFeaturesEXT>(VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT);
    features.enabledValidationFeatureCount = 1;
    features.pEnabledValidationFeatures = &sync;
    if (validation && env_on("STRATA_VK_SYNC_VALIDATION")) messenger_info.pNext = &features;

    auto ci = make<VkInstanceCreateInfo>(VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO);
    ci.pApplicationInfo = &app;
    ci.enabledLayerCount = static_cast<uint32_t>(layers.size());
    ci.ppEnabledLayerNames = layers.data();
    ci.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
    ci.ppEnabledExtensionNames = extensions.data();
    // Chained so that messages from vkCreateInstance/vkDestroyInstance themselves are recorded too.
    if (validation) ci.pNext = &messenger_info;
    VkResult r = vkCreateInstance(&ci, nullptr, &instance_);
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER)
        throw DeviceError(
            "no Vulkan driver found (vkCreateInstance: VK_ERROR_INCOMPATIBLE_DRIVER); without a GPU, "
            "install Mesa's lavapipe (mesa-vulkan-drivers)");
    check(r, "vkCreateInstance");

    if (validation) {
        auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
            vkGetInstanceProcAddr(instance_, "vkCreateDebugUtilsMessengerEXT"));
        if (!create) {
            vkDestroyInstance(instance_, nullptr);
            throw DeviceError("vkCreateDebugUtilsMessengerEXT is missing although VK_EXT_debug_utils was enabled");
        }
        messenger_info.pNext = nullptr;
        r = create(instance_, &messenger_info, nullptr, &messenger_);
        if (r != VK_SUCCESS) {
            vkDestroyInstance(instance_, nullptr);
            check(r, "vkCreateDebugUtilsMessengerEXT");
        }
    }
}

Instance::~Instance() {
    if (messenger_) {
        auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
            vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
        if (destroy) destroy(instance_, messenger_, nullptr);
    }
    if (instance_) vkDestroyInstance(instance_, nullptr);
}

std::vector<VkPhysicalDevice> Instance::physical_devices() const {
    uint32_t n = 0;
    check(vkEnumeratePhysicalDevices(instance_, &n, nullptr), "vkEnumeratePhysicalDevices");
    std::vector<VkPhysicalDevice> out(n);
    VkResult r = vkEnumeratePhysicalDevices(instance_, &n, out.data());
    if (r != VK_INCOMPLETE) check(r, "vkEnumeratePhysicalDevices");
    out.resize(n);
    return out;
}

namespace {

bool has_device_extension(VkPhysicalDevice pd, std::string_view name) {
    uint32_t n = 0;
    if (vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, nullptr) != VK_SUCCESS) return false;
    std::vector<VkExtensionProperties> ext(n);
    if (vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, ext.data()) != VK_SUCCESS) return false;
    return std::any_of(ext.begin(), ext.begin() + n,
                       [&](const VkExtensionProperties& e) { return name == e.extensionName; });
}

// Whether matmul_coopmat.comp can run: VK_NV_cooperative_matrix with its feature, 16 x 16 x 16 products of
// binary16 into float32 at subgroup scope, binary16 arithmetic types and the Vulkan memory model (which the
// compiled shader declares), subgroups of 32 (four to its workgroup of 128) and room for its shared memory.
bool cooperative_matrix_nv(VkInstance instance, VkPhysicalDevice pd, const VkPhysicalDeviceProperties& p,
                           uint32_t subgroup_size) {
    if (p.apiVersion < VK_API_VERSION_1_2 || subgroup_size != 32 ||
        p.limits.maxComputeSharedMemorySize < kCoopmatSharedBytes ||
        !has_device_extension(pd, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME))
        return false;
    auto cm = make<VkPhysicalDeviceCooperativeMatrixFeaturesNV>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV);
    auto v12 = make<VkPhysicalDeviceVulkan12Features>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES);
    v12.pNext = &cm;
    auto f2 = make<VkPhysicalDeviceFeatures2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2);
    f2.pNext = &v12;
    vkGetPhysicalDeviceFeatures2(pd, &f2);
    if (!cm.cooperativeMatrix || !v12.shaderFloat16 || !v12.vulkanMemoryModel) return false;
    auto list = reinterpret_cast<PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV>(
        vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV"));
    if (!list) return false;
    uint32_t n = 0;
    if (list(pd, &n, nullptr) != VK_SUCCESS || n == 0 || n > 4096) return false;
    std::vector<VkCooperativeMatrixPropertiesNV> props(
        n, make<VkCooperativeMatrixPropertiesNV>(VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV));
    const VkResult r = list(pd, &n, props.data());
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) return false;
    return std::any_of(props.begin(), props.begin() + std::min<size_t>(n, props.size()), [](const auto& c) {
        return c.MSize == 16 && c.NSize == 16 && c.KSize == 16 && c.AType == VK_COMPONENT_TYPE_FLOAT16_NV &&
               c.BType == VK_COMPONENT_TYPE_FLOAT16_NV && c.CType == VK_COMPONENT_TYPE_FLOAT32_NV &&
               c.DType == VK_COMPONENT_TYPE_FLOAT32_NV && c.scope == VK_SCOPE_SUBGROUP_NV;
    });
}

}  // namespace

VulkanDeviceInfo describe_device(VkInstance instance, VkPhysicalDevice pd, int index) {
    VkPhysicalDeviceProperties p{};
    vkGetPhysicalDeviceProperties(pd, &p);
    VulkanDeviceInfo info;
    info.index = index;
    info.name = p.deviceName;
    info.type = type_name(p.deviceType);
    info.api_version = version_string(p.apiVersion);
    info.max_storage_buffer_range = p.limits.maxStorageBufferRange;
    info.driver = driver_version_string(p);

    VkPhysicalDeviceMemoryProperties mem{};
    vkGetPhysicalDeviceMemoryProperties(pd, &mem);
    for (uint32_t h = 0; h < mem.memoryHeapCount; ++h)
        if (mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
            info.memory = std::max<uint64_t>(info.memory, mem.memoryHeaps[h].size);

    std::vector<std::string> missing;
    if (p.apiVersion < VK_API_VERSION_1_2) {
        missing.push_back("Vulkan 1.2 (the device offers " + info.api_version + ")");
    } else {
        // Both structs are core in 1.1/1.2, so chaining them is valid only on such devices.
        auto subgroup = make<VkPhysicalDeviceSubgroupProperties>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES);
        auto driver = make<VkPhysicalDeviceDriverProperties>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES);
        subgroup.pNext = &driver;
        auto p2 = make<VkPhysicalDeviceProperties2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2);
        p2.pNext = &subgroup;
        vkGetPhysicalDeviceProperties2(pd, &p2);
        info.subgroup_size = subgroup.subgroupSize;
        info.max_workgroup_invocations =
            std::min(p.limits.maxComputeWorkGroupInvocations, p.limits.maxComputeWorkGroupSize[0]);
        if (driver.driverName[0]) info.driver = std::string(driver.driverName) + " " + driver.driverInfo;
        if (!(subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT))
            missing.push_back("subgroup operations in compute shaders");
        const VkSubgroupFeatureFlags ops = VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT;
        if ((subgroup.supportedOperations & ops) != ops) missing.push_back("subgroup arithmetic (subgroupAdd/Max)");
        info.subgroup_shuffle = (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT) != 0;
        info.cooperative_matrix = cooperative_matrix_nv(instance, pd, p, info.subgroup_size);
    }
    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, nullptr);
    std::vector<VkQueueFamilyProperties> qf(nq);
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, qf.data());
    if (std::none_of(qf.begin(), qf.end(),
                     [](const VkQueueFamilyProperties& q) { return q.queueFlags & VK_QUEUE_COMPUTE_BIT; }))
        missing.push_back("a compute queue");
    info.usable = missing.empty();
    for (size_t i = 0; i < missing.size(); ++i) info.unusable_reason += (i ? ", " : "lacks ") + missing[i];
    return info;
}

int best_device(const std::vector<VulkanDeviceInfo>& devices) {
    int best = -1;
    for (const auto& d : devices)
        if (d.usable && (best < 0 || type_score(d.type) > type_score(devices[static_cast<size_t>(best)].type)))
            best = d.index;
    return best;
}

Context::Context(const ContextOptions& options) {
    validation_ = options.validation || validation_from_env();
    instance_ = std::make_unique<Instance>(validation_);

    const std::vector<VkPhysicalDevice> pds = instance_->physical_devices();
    if (pds.empty())
        throw DeviceError("no Vulkan device found (without a GPU, install mesa-vulkan-drivers for lavapipe)");
    std::vector<VulkanDeviceInfo> infos;
    for (size_t i = 0; i < pds.size(); ++i)
        infos.push_back(describe_device(instance_->handle(), pds[i], static_cast<int>(i)));
    auto listing = [&] {
        std::string s;
        for (const auto& d : infos)
            s += (s.empty() ? "" : "; ") + std::to_string(d.index) + ": " + d.name + " (" + d.type + ")";
        return s;
    };
    int index = options.device_index;
    if (index < 0) {
        index = best_device(infos);
        if (index < 0) throw DeviceError("no usable Vulkan device: " + infos[0].name + " " + infos[0].unusable_reason);
    } else if (index >= static_cast<int>(infos.size())) {
        throw DeviceError("no Vulkan device " + std::to_string(index) + ": this machine has " +
                          std::to_string(infos.size()) + " (" + listing() + ")");
    } else if (!infos[static_cast<size_t>(index)].usable) {
        throw DeviceError("Vulkan device " + std::to_string(index) + " (" + infos[static_cast<size_t>(index)].name +
                          ") cannot run Strata: it " + infos[static_cast<size_t>(index)].unusable_reason);
    }
    physical_ = pds[static_cast<size_t>(index)];
    info_ = infos[static_cast<size_t>(index)];
    info_.chosen = true;
    vkGetPhysicalDeviceProperties(physical_, &properties_);
    vkGetPhysicalDeviceMemoryProperties(physical_, &memory_);

    // How big one buffer and one binding may be.
    auto m3 = make<VkPhysicalDeviceMaintenance3Properties>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES);
    auto m4 = make<VkPhysicalDeviceMaintenance4Properties>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES);
    if (properties_.apiVersion >= VK_API_VERSION_1_3) m3.pNext = &m4;
    auto p2 = make<VkPhysicalDeviceProperties2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2);
    p2.pNext = &m3;
    vkGetPhysicalDeviceProperties2(physical_, &p2);
    max_allocation_ = m3.maxMemoryAllocationSize;
    if (properties_.apiVersion >= VK_API_VERSION_1_3 && m4.maxBufferSize > 0)
        max_allocation_ = std::min<uint64_t>(max_allocation_, m4.maxBufferSize);
    uint64_t range = properties_.limits.maxStorageBufferRange;
    if (options.max_binding_range > 0) range = std::min<uint64_t>(range, options.max_binding_range);
    range = std::min<uint64_t>(range, max_allocation_);
    max_binding_range_ = range / 256 * 256;
    if (max_binding_range_ < 4096)
        throw DeviceError("a storage-buffer binding range of " + std::to_string(range) +
                          " bytes is too small to work with");

    // One queue from a compute family; one that can write timestamps lets bench report GPU time.
    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(physical_, &nq, nullptr);
    std::vector<VkQueueFamilyProperties> qf(nq);
    vkGetPhysicalDeviceQueueFamilyProperties(physical_, &nq, qf.data());
    int family = -1;
    for (uint32_t i = 0; i < nq; ++i) {
        if (!(qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
        if (family < 0 || (qf[i].timestampValidBits > 0 && qf[static_cast<size_t>(family)].timestampValidBits == 0))
            family = static_cast<int>(i);
    }
    queue_family_ = static_cast<uint32_t>(family);
    timestamp_bits_ = qf[queue_family_].timestampValidBits;

    const float priority = 1.0f;
    auto qci = make<VkDeviceQueueCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO);
    qci.queueFamilyIndex = queue_family_;
    qci.queueCount = 1;
    qci.pQueuePriorities = &priority;
    // Weights are read as 32-bit words and widened in the shader, so no storageBuffer16BitAccess; subgroup
    // arithmetic was checked above. Where the prefill matmul can run on matrix units (VK_NV_cooperative_matrix,
    // see describe_device) its extension and features are enabled; nothing else is optional.
    auto dci = make<VkDeviceCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO);
    dci.queueCreateInfoCount = 1;
    dci.pQueueCreateInfos = &qci;
    auto cm = make<VkPhysicalDeviceCooperativeMatrixFeaturesNV>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV);
    auto v12 = make<VkPhysicalDeviceVulkan12Features>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES);
    const char* coopmat_extension = VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME;
    if (info_.cooperative_matrix) {
        cm.cooperativeMatrix = VK_TRUE;
        v12.shaderFloat16 = VK_TRUE;
        v12.vulkanMemoryModel = VK_TRUE;
        v12.pNext = &cm;
        dci.pNext = &v12;
        dci.enabledExtensionCount = 1;
        dci.ppEnabledExtensionNames = &coopmat_extension;
    }
    VkResult created = vkCreateDevice(physical_, &dci, nullptr, &device_);
    if (created != VK_SUCCESS && created != VK_ERROR_DEVICE_LOST && info_.cooperative_matrix) {
        // A driver that lists the extension and features but refuses them costs prompt speed, not the device.
        coopmat_note_ = "the device refused the cooperative-matrix extension (vkCreateDevice: " +
                        result_name(created) + ")";
        info_.cooperative_matrix = false;
        dci.pNext = nullptr;
        dci.enabledExtensionCount = 0;
        dci.ppEnabledExtensionNames = nullptr;
        created = vkCreateDevice(physical_, &dci, nullptr, &device_);
    }
    check(created, "vkCreateDevice");
    vkGetDeviceQueue(device_, queue_family_, 0, &queue_);

    auto pci = make<VkCommandPoolCreateInfo>(VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO);
    pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pci.queueFamilyIndex = queue_family_;
    VkResult r = vkCreateCommandPool(device_, &pci, nullptr, &command_pool_);
    if (r != VK_SUCCESS) {
        vkDestroyDevice(device_, nullptr);
        check(r, "vkCreateCommandPool");
    }
    pipeline_cache_ = std::make_unique<PipelineCache>(device_, properties_, options.pipeline_cache_folder);
    pool_ = std::make_unique<MemoryPool>(device_, max_allocation_);
    device_local_limit_ = options.device_local_limit;
}

Context::~Context() {
    if (device_) {
        vkDeviceWaitIdle(device_);  // nothing may still run on memory about to be freed; errors are moot here
        pipeline_cache_.reset();    // saves the file
        pool_.reset();              // every buffer is gone (they are destroyed before the context)
        if (command_pool_) vkDestroyCommandPool(device_, command_pool_, nullptr);
        vkDestroyDevice(device_, nullptr);
    }
}

std::optional<uint32_t> Context::find_memory_type(uint32_t type_bits, VkMemoryPropertyFlags required,
                                                  VkMemoryPropertyFlags preferred,
                                                  VkMemoryPropertyFlags avoided) const {
    std::optional<uint32_t> best;
    int best_score = -1000;
    for (uint32_t i = 0; i < memory_.memoryTypeCount; ++i) {
        if (!(type_bits & (1u << i))) continue;
        const VkMemoryPropertyFlags f = memory_.memoryTypes[i].propertyFlags;
        if ((f & required) != required) continue;
        const int score = __builtin_popcount(f & preferred) * 2 - __builtin_popcount(f & avoided);
        if (score > best_score) {
            best_score = score;
            best = i;
        }
    }
    return best;
}

uint64_t Context::host_visible_heap() const {
    // Only a heap apart from device memory adds room: on a UMA device the host-visible types live in the
    // device-local heap itself, and counting it twice would let a model twice its size start loading.
    uint64_t best = 0;
    for (uint32_t i = 0; i < memory_.memoryTypeCount; ++i) {
        const VkMemoryHeap& heap = memory_.memoryHeaps[memory_.memoryTypes[i].heapIndex];
        if ((memory_.memoryTypes[i].propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) &&
            !(heap.flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT))
            best = std::max(best, heap.size);
    }
    return best;
}

uint64_t Context::heap_size_of_type(uint32_t type) const {
    return memory_.memoryHeaps[memory_.memoryTypes[type].heapIndex].size;
}

}  // namespace strata::vk

namespace strata {

std::vector<VulkanDeviceInfo> list_vulkan_devices() {
    vk::Instance instance(false);
    std::vector<VulkanDeviceInfo> out;
    const auto pds = instance.physical_devices();
    for (size_t i = 0; i < pds.size(); ++i)
        out.push_back(vk::describe_device(instance.handle(), pds[i], static_cast<int>(i)));
    const int best = vk::best_device(out);
    if (best >= 0) out[static_cast<size_t>(best)].chosen = true;
    return out;
}

}  // namespace strata
