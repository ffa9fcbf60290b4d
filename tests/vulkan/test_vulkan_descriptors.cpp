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
    struct Mode {
        const char* fuse;
        KvCacheType kv;
    };
    for (const Mode& mode : {Mode{"1", KvCacheType::F32}, Mode{"0", KvCacheType::F32}, Mode{"1", KvCacheType::F16}}) {
        const char* fuse = mode.fuse;
        INFO("STRATA_VK_FUSE=" << fuse << ", KV cache " << kv_cache_type_name(mode.kv));
        const ScopedEnv env("STRATA_VK_FUSE", fuse);
        auto gpu = make_vulkan();
        gpu->load(*model);
        Transformer tf(*model, *gpu);
        KVCache cache(*gpu, model->config, 32, mode.kv);  // binary16: its stores bind the caches whole too
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
