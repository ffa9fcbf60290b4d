// Descriptor sets that stay the same across decode steps: the KV caches, the RoPE table and the outputs of
// single-dispatch products are bound whole, with positions and lengths in push constants, so a decode step after
// the first finds every set it needs in the cache and writes none; synchronization validation stays clean (it
// takes a descriptor's whole range as accessed).
#include "strata/transformer.hpp"
#include "vk_helpers.hpp"

using namespace strata;
using namespace strata::test;

TEST_CASE("decode steps write no descriptor set once the first has run", "[vulkan][descriptors][model][golden]") {
    const ScopedEnv sync("STRATA_VK_SYNC_VALIDATION", "1");
    const auto model = load_model(golden_hf_dir());
    const std::vector<int32_t> tokens = expected()["prompts"]["short"]["tokens"].get<std::vector<int32_t>>();
    for (const char* fuse : {"1", "0"}) {
        INFO("STRATA_VK_FUSE=" << fuse);
        const ScopedEnv env("STRATA_VK_FUSE", fuse);
        auto gpu = make_vulkan();
        gpu->load(*model);
        Transformer tf(*model, *gpu);
        KVCache cache(*gpu, model->config, 32);
        tf.prefill(cache, tokens, TraceRequest{});
        std::vector<int64_t> writes;
        for (int i = 0; i < 4; ++i) {
            tf.decode(cache, tokens[size_t(i)], TraceRequest{});  // the default trace
            writes.push_back(vulkan_last_step_stats(*gpu).descriptor_writes);
        }
        INFO("descriptor writes per decode step: " << writes[0] << " " << writes[1] << " " << writes[2] << " "
                                                   << writes[3]);
        CHECK(writes[1] == 0);
        CHECK(writes[2] == 0);
        CHECK(writes[3] == 0);
    }
    require_no_validation_messages();
}
