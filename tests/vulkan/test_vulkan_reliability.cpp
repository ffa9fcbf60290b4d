// A failing device, seen from the tests: the validation collector records a deliberate mistake (so a clean run
// means something), a device wait gives up when cancelled and the backend works afterwards, and a lost device
// becomes a DeviceLostError that says what to do.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "../../engine/src/vulkan/context.hpp"
#include "../../engine/src/vulkan/vk_check.hpp"
#include "strata/error.hpp"
#include "strata/transformer.hpp"
#include "vk_helpers.hpp"

using namespace strata;
using namespace strata::test;
using Catch::Contains;

TEST_CASE("the validation message collector records a deliberate validation error", "[vulkan][reliability]") {
    clear_vulkan_validation_messages();
    {
        vk::ContextOptions o;
        o.validation = true;
        vk::Context ctx(o);
        // A buffer of size 0 breaks VUID-VkBufferCreateInfo-size-00912.
        auto ci = vk::make<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
        ci.size = 0;
        ci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
        VkBuffer buffer = VK_NULL_HANDLE;
        if (vkCreateBuffer(ctx.device(), &ci, nullptr, &buffer) == VK_SUCCESS && buffer)
            vkDestroyBuffer(ctx.device(), buffer, nullptr);
    }
    const std::vector<std::string> messages = vulkan_validation_messages();
    clear_vulkan_validation_messages();
    REQUIRE_FALSE(messages.empty());
    bool named = false;
    for (const std::string& m : messages) named = named || m.find("VUID-VkBufferCreateInfo-size") != std::string::npos;
    CHECK(named);
}

TEST_CASE("a device wait gives up when cancelled, and the next step waits for the work left running",
          "[vulkan][reliability]") {
    const auto model = load_model(golden_hf_dir());
    // One long dispatch (the wait times out, then sees the cancel), then a step sent in many short parts
    // (STRATA_VK_SUBMIT=1,1: each part's fence signals within a wait slice; the cancel is seen between them).
    struct Mode {
        int64_t T;
        const char* submit;
    };
    for (const Mode& mode : {Mode{250, ""}, Mode{1, "1,1"}}) {
        INFO("T = " << mode.T << " STRATA_VK_SUBMIT=" << mode.submit);
        ScopedEnv parts("STRATA_VK_SUBMIT", mode.submit);
        auto b = make_vulkan();
        b->load(*model);
        const int64_t T = mode.T, V = model->config.vocab_size, dim = model->config.dim;  // 250 x V < 128 MiB
        const Buf x = b->alloc(T * dim, "x"), out = b->alloc(T * V, "logits");
        const std::vector<float> values = random_floats(T * dim, 7);
        int reps = 1;
        auto one_big_step = [&](const std::atomic<bool>* cancel) {
            b->begin();
            b->write(x, values);
            // At T = 250 one dispatch of 8 GFLOP: seconds on lavapipe, a millisecond on a fast GPU, which
            // repeats it.
            for (int i = 0; i < reps; ++i) b->matmul(out, x, model->output_weight(), T);
            b->submit(cancel);
        };
        using clock = std::chrono::steady_clock;
        auto t0 = clock::now();
        one_big_step(nullptr);
        double full = std::chrono::duration<double>(clock::now() - t0).count();
        if (full < 0.25) {  // a step the cancel (after 20 ms) can cut short by more than half
            reps = static_cast<int>(std::min(4096.0, std::ceil(0.25 / std::max(full, 1e-5))));
            t0 = clock::now();
            one_big_step(nullptr);
            full = std::chrono::duration<double>(clock::now() - t0).count();
        }

        std::atomic<bool> cancel{false};
        std::thread raiser([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            cancel = true;
        });
        t0 = clock::now();
        CHECK_THROWS_AS(one_big_step(&cancel), Cancelled);
        const double cancelled = std::chrono::duration<double>(clock::now() - t0).count();
        raiser.join();
        INFO(reps << " products: uncancelled step " << full << " s, cancelled after " << cancelled << " s");
        CHECK(cancelled < 0.5 * full);

        // The backend still works: the next step first waits for the abandoned one, then runs as usual.
        b->begin();
        const Readback r = b->readback(out.at(0, 8), 8);
        b->submit();
        const std::vector<float> first = b->fetch(r);
        std::vector<float> w(static_cast<size_t>(dim));
        for (int64_t j = 0; j < 8; ++j) {
            model->output_weight().row_to_f32(j, w.data());
            double s = 0;
            for (int64_t i = 0; i < dim; ++i) s += double(values[size_t(i)]) * w[size_t(i)];
            CHECK(first[size_t(j)] == Approx(s).margin(1e-3));
        }
    }
    require_no_validation_messages();
}

TEST_CASE("a lost device is a DeviceLostError that says how to go on", "[vulkan][reliability]") {
    try {
        vk::check(VK_ERROR_DEVICE_LOST, "vkQueueSubmit");
        FAIL("no error");
    } catch (const DeviceLostError& e) {
        CHECK_THAT(std::string(e.what()), Contains("vkQueueSubmit") && Contains("reset") && Contains("CPU backend"));
    }
    CHECK_THROWS_AS(vk::check(VK_ERROR_DEVICE_LOST, "vkWaitForFences"), DeviceError);  // a DeviceError too
}

TEST_CASE("when device-local memory is full, buffers go to host-visible memory and the model runs the same",
          "[vulkan][reliability]") {
    const auto model = load_model(golden_hf_dir());
    auto logits_of = [&](Backend& b) {
        b.load(*model);
        Transformer tf(*model, b);
        KVCache cache(b, model->config, 16);
        TraceRequest cheap;
        cheap.residuals = false;
        std::vector<float> l = tf.prefill(cache, std::vector<int32_t>{model->config.bos_id, 400, 77, 1234}, cheap).last_logits;
        return tf.decode(cache, 999, cheap).last_logits;
    };
    auto normal = make_vulkan();
    const std::vector<float> want = logits_of(*normal);
    CHECK(vulkan_memory_placement(*normal).host_visible_bytes == 0);

    BackendOptions o = vulkan_options();
    o.device_local_limit = 256 << 10;  // a carve-out far smaller than the weights
    auto small = make_backend(o);
    const std::vector<float> got = logits_of(*small);
    const VulkanMemoryPlacement placed = vulkan_memory_placement(*small);
    INFO("device-local " << placed.device_local_bytes << " B, host-visible " << placed.host_visible_bytes << " B");
    CHECK(placed.device_local_bytes <= (256u << 10));
    CHECK(placed.host_visible_bytes > 1000000);
    require_close(got, want, 0.0);
    require_no_validation_messages();
}
