// Host writes and the logit lens on the device: write() lands exactly where asked (across the 64 KiB pieces
// vkCmdUpdateBuffer takes), out-of-range writes are errors, and Transformer::project (final norm + output on
// the backend) turns the reference's own residual stream into the reference's logits, on Vulkan as on the CPU.
#include <limits>

#include "strata/error.hpp"
#include "strata/npy.hpp"
#include "strata/transformer.hpp"
#include "vk_helpers.hpp"

using namespace strata;
using namespace strata::test;

TEST_CASE("write puts host values into a device buffer between other ops", "[vulkan][lens]") {
    auto gpu = make_vulkan();
    const int64_t n = 40000;  // 160,000 bytes: three vkCmdUpdateBuffer pieces
    const std::vector<float> values = random_floats(n, 7);
    Buf buf = gpu->alloc(n + 16, "written");
    Buf twice = gpu->alloc(n, "twice");
    gpu->begin();
    gpu->write(buf.at(8, n), values);
    gpu->add(twice, buf.at(8, n), buf.at(8, n), n);  // reads what the write wrote: a hazard the tracking must see
    const Readback all = gpu->readback(buf, n + 16);
    const Readback sum = gpu->readback(twice, n);
    gpu->submit();
    const std::vector<float> got = gpu->fetch(all);
    const std::vector<float> doubled = gpu->fetch(sum);
    for (int64_t i = 0; i < 8; ++i) {
        CHECK(got[size_t(i)] == 0.0f);          // untouched before
        CHECK(got[size_t(n + 8 + i)] == 0.0f);  // and after
    }
    CHECK(std::equal(values.begin(), values.end(), got.begin() + 8));
    for (int64_t i = 0; i < n; ++i) REQUIRE(doubled[size_t(i)] == 2.0f * values[size_t(i)]);

    gpu->begin();
    CHECK_THROWS_AS(gpu->write(buf.at(n, 32), values), Error);  // more values than the range holds
    CHECK_THROWS_AS(gpu->write(Buf{buf.id, n + 10, 10}, std::vector<float>(10, 1.0f)), Error);  // past the end
    gpu->submit();
    gpu->free(buf);
    gpu->free(twice);
    require_no_validation_messages();
}

TEST_CASE("the logit lens on the device turns the reference residuals into the reference logits", "[vulkan][lens][golden]") {
    const auto model = load_model(golden_hf_dir());
    const ModelConfig& c = model->config;
    const auto ref_dir = reference_dir() / "short";
    const NpyArray ref_logits = read_npy(ref_dir / "logits.npy");
    const int64_t T = static_cast<int64_t>(ref_logits.data.size()) / c.vocab_size;
    const int64_t p = T - 1;
    // The reference's x0, h.0 .. h.{L-1} at the last position: [L + 1, dim].
    std::vector<float> rows;
    for (int64_t l = 0; l <= c.n_layers; ++l) {
        const NpyArray h = read_npy(ref_dir / (l == 0 ? std::string("x0.npy") : "h." + std::to_string(l - 1) + ".npy"));
        rows.insert(rows.end(), h.data.begin() + p * c.dim, h.data.begin() + (p + 1) * c.dim);
    }
    std::vector<float> lens[2];
    int which = 0;
    for (auto& b : {make_cpu(), make_vulkan()}) {
        b->load(*model);
        Transformer tf(*model, *b);
        lens[which++] = tf.project(rows, c.n_layers + 1);
        CHECK_THROWS_AS(tf.project(std::span<const float>(rows).first(size_t(c.dim + 1)), 1), InputError);
    }
    const int64_t V = c.vocab_size;
    REQUIRE(lens[1].size() == size_t((c.n_layers + 1) * V));
    REQUIRE(all_finite(lens[1]));
    // Row by row the device agrees with the CPU backend ...
    for (int64_t l = 0; l <= c.n_layers; ++l) {
        INFO("lens row " << l);
        const std::vector<float> cpu(lens[0].begin() + l * V, lens[0].begin() + (l + 1) * V);
        const std::vector<float> gpu(lens[1].begin() + l * V, lens[1].begin() + (l + 1) * V);
        CHECK(rel_l2(gpu, cpu) < 1e-5);
    }
    // ... and the last row, h.{L-1} read out, is the reference's own logits at that position.
    const std::vector<float> last(lens[1].end() - V, lens[1].end());
    const std::vector<float> want(ref_logits.data.begin() + p * V, ref_logits.data.begin() + (p + 1) * V);
    CHECK(rel_l2(last, want) < 5e-3);
    require_no_validation_messages();
}
