// Device memory in pooled blocks (engine/src/vulkan/memory_pool.hpp): many buffers share a few VkDeviceMemory
// allocations, each buffer keeps its own bytes (no two overlap: values written into each come back unchanged
// after others were freed and allocated around them), freed ranges are used again, and blocks go back to the
// driver when their last buffer goes. The host-visible fallback when device memory is full is tested in
// test_vulkan_reliability.cpp.
#include "strata/transformer.hpp"
#include "vk_helpers.hpp"

using namespace strata;
using namespace strata::test;

namespace {

std::vector<float> values_for(int64_t n, int seed) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float(seed) * 1000.0f + float(i % 997);
    return v;
}

}  // namespace

TEST_CASE("buffers share pooled blocks, keep their own bytes, and give the memory back", "[vulkan][memory]") {
    Filler f;
    const Model& m = f.model();
    auto gpu = make_vulkan();
    gpu->load(m);
    {
        // A first step with a readback: its host page (memory of its own) stays for later steps.
        const Buf warm = gpu->alloc(16, "warm-up");
        gpu->begin();
        gpu->readback(warm, 16);
        gpu->submit();
        gpu->free(warm);
    }
    const VulkanMemoryPlacement start = vulkan_memory_placement(*gpu);

    struct Held {
        Buf buf;
        int seed;
    };
    std::vector<Held> held;
    int seed = 1;
    auto add = [&](int64_t n) {
        Held h{gpu->alloc(n, "pooled"), seed++};
        gpu->begin();
        gpu->write(h.buf, values_for(n, h.seed));
        gpu->submit();
        held.push_back(h);
    };
    auto check_all = [&] {
        gpu->begin();
        std::vector<Readback> rbs;
        for (const Held& h : held) rbs.push_back(gpu->readback(h.buf, h.buf.count));
        gpu->submit();
        for (size_t i = 0; i < held.size(); ++i) {
            INFO("buffer " << i << " of " << held[i].buf.count << " floats");
            REQUIRE(gpu->fetch(rbs[i]) == values_for(held[i].buf.count, held[i].seed));
        }
    };
    for (int i = 0; i < 120; ++i) add(1000 + 37 * (i % 7));  // odd sizes: ranges of every alignment
    const VulkanMemoryPlacement full = vulkan_memory_placement(*gpu);
    INFO("buffers " << start.buffers << " -> " << full.buffers << ", allocations " << start.allocations << " -> "
                    << full.allocations);
    CHECK(full.buffers == start.buffers + 120);
    CHECK(full.allocations <= start.allocations + 1);  // 120 buffers of ~4 KiB: one 16 MiB block
    check_all();

    // Every other one freed, and others of new sizes (some bigger than the gaps) allocated into the holes.
    std::vector<Held> kept;
    for (size_t i = 0; i < held.size(); ++i) {
        if (i % 2) gpu->free(held[i].buf);
        else kept.push_back(held[i]);
    }
    held = kept;
    for (int i = 0; i < 60; ++i) add(i % 3 == 0 ? 3000 : 500);
    check_all();
    CHECK(vulkan_memory_placement(*gpu).allocations <= start.allocations + 1);
    // A new buffer is zeroed even where an earlier one's bytes were.
    {
        const Buf z = gpu->alloc(2000, "zeroed");
        gpu->begin();
        const Readback r = gpu->readback(z, 2000);
        gpu->submit();
        CHECK(gpu->fetch(r) == std::vector<float>(2000, 0.0f));
        gpu->free(z);
    }

    for (const Held& h : held) gpu->free(h.buf);
    gpu->begin();  // buffers freed are released once no step can use them
    gpu->submit();
    const VulkanMemoryPlacement end = vulkan_memory_placement(*gpu);
    CHECK(end.buffers == start.buffers);
    CHECK(end.allocations == start.allocations);  // the block went back to the driver
    require_no_validation_messages();
}

TEST_CASE("a model's buffers take a few allocations, and the model runs as before", "[vulkan][memory][golden]") {
    const auto model = load_model(golden_hf_dir());
    auto gpu = make_vulkan();
    gpu->load(*model);
    Transformer tf(*model, *gpu);
    KVCache cache(*gpu, model->config, 32);
    const std::vector<int32_t> tokens = expected()["prompts"]["short"]["tokens"].get<std::vector<int32_t>>();
    const Trace t = tf.prefill(cache, tokens, TraceRequest{});
    const VulkanMemoryPlacement placed = vulkan_memory_placement(*gpu);
    INFO("buffers " << placed.buffers << ", allocations " << placed.allocations);
    CHECK(placed.buffers > 40);
    CHECK(placed.allocations <= 8);  // staging and result pages of their own, the rest in a block or two

    auto cpu = make_cpu();
    cpu->load(*model);
    Transformer tf_cpu(*model, *cpu);
    KVCache cache_cpu(*cpu, model->config, 32);
    const Trace want = tf_cpu.prefill(cache_cpu, tokens, TraceRequest{});
    require_close(t.last_logits, want.last_logits, 1e-4);
    require_no_validation_messages();
}
