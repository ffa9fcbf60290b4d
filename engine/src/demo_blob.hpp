#pragma once
// The trained demonstration model's compact weights (resources/demo/demo-model.bin), embedded into the engine at
// build time so that make-demo needs nothing from the source tree at run time.
#include <cstddef>
#include <span>
#include <string_view>

namespace strata::detail {

std::span<const std::byte> demo_blob();
std::string_view demo_blob_sha256();  // of the file that was embedded, for config.json and for tests

}  // namespace strata::detail
