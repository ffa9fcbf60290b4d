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

    // The induction measurement agrees across backends (the shipped model's ratio is recorded, and bounded, in
    // tests/engine/test_demo.cpp: this training run formed no induction head).
    const InductionScore ind = induction_score(*model, *gpu, 1, 16, 7), ref = induction_score(*model, *cpu, 1, 16, 7);
    INFO("induction, 16 tokens: Vulkan first copy " << ind.first << ", second " << ind.second << "; CPU " << ref.first
                                                    << ", " << ref.second);
    CHECK(std::abs(ind.ratio() - ref.ratio()) < 2e-3);
    require_no_validation_messages();
}
