// Pipelines are built at load, never inside a step, and kept in a pipeline cache on disk that a later run reads;
// a cache file that is truncated, changed, oversized or not ours is ignored (the backend works as without it)
// and replaced by a clean one.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "../../engine/src/vulkan/context.hpp"
#include "strata/transformer.hpp"
#include "vk_helpers.hpp"

using namespace strata;
using namespace strata::test;
using Catch::Contains;
using Catch::Matchers::StartsWith;

namespace {

std::string read_bytes(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::filesystem::path& p, const std::string& bytes) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The only file in the folder (the cache names itself after the device).
std::filesystem::path cache_file(const std::filesystem::path& dir) {
    std::filesystem::path found;
    for (const auto& e : std::filesystem::directory_iterator(dir))
        if (e.path().extension() == ".bin") found = e.path();
    return found;
}

// Greedy logits of a 20-token prompt (long enough for the flash-attention tiles) and two decode steps on the golden
// model.
std::vector<float> run(Backend& b, const Model& model, KvCacheType kv = KvCacheType::F32) {
    Transformer tf(model, b);
    KVCache cache(b, model.config, 32, kv);
    TraceRequest cheap;
    cheap.residuals = false;
    std::vector<int32_t> prompt{model.config.bos_id};
    for (int32_t i = 1; i < 20; ++i) prompt.push_back(100 + 37 * i);
    std::vector<float> logits = tf.prefill(cache, prompt, cheap).last_logits;
    for (int32_t id : {500, 900}) logits = tf.decode(cache, id, cheap).last_logits;
    return logits;
}

}  // namespace

TEST_CASE("every pipeline a prompt and decode steps need is built at load, none inside a step",
          "[vulkan][pipeline_cache]") {
    const auto model = load_model(golden_hf_dir());
    auto b = make_vulkan();
    b->load(*model);
    const size_t at_load = vulkan_pipelines_built(*b);
    CHECK(at_load > 10);
    run(*b, *model);
    CHECK(vulkan_pipelines_built(*b) == at_load);
    // A binary16 cache builds its own when it is made, not inside a step either.
    const ScopedEnv split("STRATA_VK_ATTN_SPLIT_FROM", "1");  // the split decode kernels run too
    auto h = make_vulkan();
    h->load(*model);
    const size_t f32_only = vulkan_pipelines_built(*h);
    KVCache cache(*h, model->config, 32, KvCacheType::F16);
    const size_t with_f16 = vulkan_pipelines_built(*h);
    CHECK(with_f16 > f32_only);
    run(*h, *model, KvCacheType::F16);
    CHECK(vulkan_pipelines_built(*h) == with_f16);
    require_no_validation_messages();
}

TEST_CASE("the pipeline cache is saved at load, read by the next run, and a damaged file is ignored and replaced",
          "[vulkan][pipeline_cache]") {
    const std::filesystem::path dir = temp_dir("pipeline-cache");
    vk::ContextOptions o;
    o.validation = vulkan_options().validation;
    o.pipeline_cache_folder = dir.string();
    {
        vk::Context first(o);
        CHECK(first.pipeline_cache().status() == "empty (no file yet)");
    }
    // With the environment naming the folder, a backend that loads a model writes the cache.
    const auto model = load_model(golden_hf_dir());
    ::setenv("STRATA_VK_PIPELINE_CACHE", dir.string().c_str(), 1);
    std::vector<float> want;
    {
        auto b = make_vulkan();
        b->load(*model);
        want = run(*b, *model);
    }
    const std::filesystem::path file = cache_file(dir);
    REQUIRE_FALSE(file.empty());
    const std::string good = read_bytes(file);
    CHECK(good.size() >= 24 + 32);  // our header and Vulkan's (lavapipe keeps no more than that)
    {
        vk::Context again(o);
        CHECK_THAT(again.pipeline_cache().status(), StartsWith("loaded "));
    }

    struct Damage {
        const char* what;
        std::string bytes;
        const char* says;
    };
    std::string flipped = good;
    flipped[flipped.size() / 2] ^= 0x40;
    const std::vector<Damage> damages = {
        {"cut short", good.substr(0, good.size() - 7), "ignored: "},
        {"extended", good + "appended", "truncated or extended"},
        {"one byte changed", flipped, "checksum"},
        {"too short", good.substr(0, 10), "too short"},
        {"not ours", std::string(4096, 'x'), "not a Strata pipeline cache"},
        {"an empty file", std::string(), "empty"},
    };
    for (const Damage& d : damages) {
        SECTION(d.what) {
            write_bytes(file, d.bytes);
            {
                vk::Context ctx(o);
                CHECK_THAT(ctx.pipeline_cache().status(), Contains(d.says));
            }
            // The backend runs as it did, and leaves a clean cache behind.
            {
                auto b = make_vulkan();
                b->load(*model);
                require_close(run(*b, *model), want, 0.0);
            }
            vk::Context ctx(o);
            CHECK_THAT(ctx.pipeline_cache().status(), StartsWith("loaded "));
        }
    }
    SECTION("a file far too big is not read") {
        std::filesystem::resize_file(file, vk::PipelineCache::kMaxBytes + 1);
        vk::Context ctx(o);
        CHECK_THAT(ctx.pipeline_cache().status(), Contains("more than a pipeline cache needs"));
    }
    ::unsetenv("STRATA_VK_PIPELINE_CACHE");
    require_no_validation_messages();
}
