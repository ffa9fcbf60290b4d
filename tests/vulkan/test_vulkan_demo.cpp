// The trained demonstration model on Vulkan (lavapipe here, validation on): the same greedy tokens and the same
// losses and induction measurement as the CPU backend, on short sequences (lavapipe is slow).
#include "catch.hpp"
#include "demo_support.hpp"
#include "vk_helpers.hpp"

using namespace strata;
using namespace strata::test;

TEST_CASE("the trained demo on Vulkan: greedy tokens, held-out loss and induction as on the CPU", "[vulkan][demo]") {
    const auto model = load_model(trained_demo_dir());
    auto gpu = make_vulkan();
    auto cpu = make_cpu();
    gpu->load(*model);
    cpu->load(*model);

    std::vector<int32_t> prompt = {128000};
    const auto e = model->tokenizer.encode("Once upon a time, there was a little");
    prompt.insert(prompt.end(), e.begin(), e.end());
    CHECK(greedy(*model, *gpu, prompt, 8) == greedy(*model, *cpu, prompt, 8));

    const auto seq = heldout_sequences().at(0);
    const std::vector<int32_t> ids(seq.begin(), seq.begin() + 48);
    const double on_gpu = mean(next_token_losses(*model, *gpu, ids));
    const double on_cpu = mean(next_token_losses(*model, *cpu, ids));
    INFO("held-out loss over 48 tokens: Vulkan " << on_gpu << ", CPU " << on_cpu);
    CHECK(std::abs(on_gpu - on_cpu) < 2e-3 * on_cpu);

    // The induction measurement agrees across backends, head by head (the bounds on the shipped model
    // are in tests/engine/test_demo.cpp).
    const InductionScore ind = induction_score(*model, *gpu, 1, 16, 7), ref = induction_score(*model, *cpu, 1, 16, 7);
    INFO("induction, 10-16 tokens: Vulkan first copy " << ind.first << ", second " << ind.second << ", head "
                                                       << ind.best_head() << " at " << ind.best_score() << "; CPU "
                                                       << ref.first << ", " << ref.second << ", head "
                                                       << ref.best_head() << " at " << ref.best_score());
    CHECK(std::abs(ind.ratio() - ref.ratio()) < 2e-3);
    // The induction head does its work on Vulkan too: the second copy is predicted from the first, by the same head.
    CHECK(ind.ratio() < 0.3);
    CHECK(ind.best_head() == ref.best_head());
    CHECK(ind.best_score() > 0.8);
    // Every head's prefix-matching score, read from the attention probabilities each backend traced.
    REQUIRE(ind.prefix_matching.size() == ref.prefix_matching.size());
    for (size_t h = 0; h < ind.prefix_matching.size(); ++h) {
        INFO("head " << h << ": Vulkan " << ind.prefix_matching[h] << ", CPU " << ref.prefix_matching[h]);
        CHECK(std::abs(ind.prefix_matching[h] - ref.prefix_matching[h]) < 2e-3);
    }
    require_no_validation_messages();
}
