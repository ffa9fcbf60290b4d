#pragma once
// The Vulkan backend's factory, called by make_backend("vulkan") when the engine is built with Vulkan.
#include <memory>

#include "strata/backend.hpp"

namespace strata {
std::unique_ptr<Backend> make_vulkan_backend(const BackendOptions& options);
}  // namespace strata
