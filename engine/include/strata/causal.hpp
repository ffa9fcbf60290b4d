#pragma once
// Causal questions over the forward pass, built on interventions (intervention.hpp): the activation-patching
// sweep (causal tracing) and direct logit attribution. Both run on whatever backend the transformer has.
#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "strata/intervention.hpp"
#include "strata/transformer.hpp"

namespace strata {

// metric = logit[answer] - logit[foil] at the last position.
struct PatchSweep {
    PatchSite site = PatchSite::Residual;
    double clean = 0.0;    // the metric of the clean run
    double corrupt = 0.0;  // the metric of the corrupt run
    // [n_layers][T]: the metric of the corrupt run with the clean run's activation at (site of layer L,
    // position p) patched in.
    std::vector<std::vector<double>> effect;
};

struct PatchSweepOptions {
    PatchSite site = PatchSite::Residual;
    // Called after each patched run with (done, total); return false to stop (Cancelled is thrown).
    std::function<bool(int64_t done, int64_t total)> progress;
    const std::atomic<bool>* cancel = nullptr;
    Interventions base;  // interventions in force in every run (clean, corrupt and patched)
};

// Clean and corrupt must have the same length (InputError otherwise), answer and foil must be token ids.
// The corrupt prefix before position p is shared by every patch at p (the cache is truncated, not rerun).
PatchSweep patch_sweep(Transformer& transformer, std::span<const int32_t> clean, std::span<const int32_t> corrupt,
                       int32_t answer, int32_t foil, const PatchSweepOptions& options = {});

// Direct logit attribution of one token's logit at one position, with the final RMSNorm's scale at that
// position (1 / rms of the final residual) held fixed: the logit is exactly the sum of the residual stream's
// parts projected through norm.weight and the target's row of output.
struct AttributionComponent {
    std::string name;  // "x0", "layers.L.attention.heads.H", "layers.L.feed_forward"
    double value = 0.0;
};
struct Attribution {
    int32_t target = 0;
    int64_t position = 0;
    double logit = 0.0;  // the model's logit of target at position
    double scale = 0.0;  // 1 / sqrt(mean(h^2) + eps) of the final residual h at position
    std::vector<AttributionComponent> components;  // x0, then per layer its heads then its feed_forward
};

// position < 0 means the last. Throws InputError for a bad target or position.
Attribution attribute(Transformer& transformer, std::span<const int32_t> tokens, int32_t target,
                      int64_t position = -1, const Interventions& interventions = {});

}  // namespace strata
