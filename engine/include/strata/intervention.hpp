#pragma once
// Interventions: changes to the forward pass at its traced sites. The place where a traced tensor is kept
// (trace.hpp's names) is the place where it can be changed, so reading and changing a tensor are one mechanism,
// as TransformerLens' hook points are. A TraceRequest carries them; with none, the pass is the plain one.
//
// Ablation specs (zero ablation; the GUI also offers the mean over the prompt's positions):
//   layers.L.attention.heads.H        query head H's head_dim columns of softmax(scores) @ values, before wo
//   layers.L.attention                the attention branch's output (after wo): the block's h equals its input
//   layers.L.feed_forward             the FFN branch's output
//   layers.L.feed_forward.neurons.N   hidden unit N of silu(w1 x) * (w3 x)
//   layers.L                          the whole block: its output equals its input
// Patch sites (SITE@POS, the activation at absolute position POS taken from a second prompt's run):
//   h.L | layers.L.attention_out | layers.L.ffn_out
#include <cstdint>
#include <string>
#include <vector>

#include "strata/config.hpp"

namespace strata {

struct Trace;

// One change at one traced site: columns [col0, col0 + cols) of the rows at `position` (every position when -1)
// become `values` (zero when empty). Rows of positions outside a step are left alone, so an intervention stays in
// force across the prefill and every decode step of a session.
struct Intervention {
    std::string site;           // a trace name: "layers.3.attention.heads", "layers.3.ffn_out", "h.2", ...
    int64_t col0 = 0;
    int64_t cols = -1;          // -1: the whole row
    int64_t position = -1;      // absolute position (0 is <|begin_of_text|>), -1: every position
    std::vector<float> values;  // [cols] the new values; empty: zeros
    std::string label;          // what a person asked for: "layers.3.attention.heads.5", "h.2@4"
};
using Interventions = std::vector<Intervention>;

// The sites where interventions may act, with their widths: [T, width] tensors of trace.hpp.
// Throws InputError when `site` is not one of them for this model.
int64_t site_width(const ModelConfig& config, const std::string& site);
// Throws InputError naming the intervention when its site, columns or values do not fit the model.
void validate(const Intervention& iv, const ModelConfig& config);

// One ablation spec (above) as zero-ablation interventions (two for a whole block). Throws InputError naming
// the spec when it is malformed or names a layer, head or neuron the model does not have.
Interventions parse_ablation(const std::string& spec, const ModelConfig& config);
// A comma-separated list of specs.
Interventions parse_ablations(const std::string& specs, const ModelConfig& config);

// Patch sites: the residual after block L, or a branch's output before it is added.
enum class PatchSite { Residual, AttentionOut, FfnOut };
std::string patch_site_name(PatchSite site, int64_t layer);  // "h.3", "layers.3.attention_out", ...
// "h" | "attention_out" | "ffn_out" (the patch command's --site); throws InputError otherwise.
PatchSite parse_patch_site_kind(const std::string& kind);

struct PatchSpec {
    std::string site;      // trace name, e.g. "h.3"
    int64_t position = 0;  // absolute
};
// "SITE@POS"; throws InputError naming the spec.
PatchSpec parse_patch(const std::string& spec, const ModelConfig& config);
std::vector<PatchSpec> parse_patches(const std::string& specs, const ModelConfig& config);

// The intervention that puts the donor's activation at the spec's site and position. The donor trace must have
// kept the site; throws InputError when the position is not in the donor's run.
Intervention patch_from(const Trace& donor, const PatchSpec& spec);

// Mean ablation: the same change, with the mean over the positions of `clean` (which kept the site) in place
// of zero. Throws InputError when the trace lacks the site.
Intervention mean_ablation(const Intervention& zero, const Trace& clean);

}  // namespace strata
