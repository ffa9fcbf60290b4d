// strata-cli attribute: direct logit attribution. The target's logit at a position split into what x0, every
// attention head and every feed-forward wrote into the residual stream, with the final RMSNorm's scale held
// fixed, so that the components sum to the logit. JSON: {"logit": x, "components": [{"name", "value"}, ...]}.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "model_args.hpp"
#include "strata/causal.hpp"

namespace strata::cli {
namespace {

int run_attribute(const Args& args) {
    auto keys = model_option_keys();
    keys.insert(keys.end(), {"tokens", "target", "position"});
    args.allow_only(keys);
    const auto tokens = args.get_ids("tokens");
    const auto target = args.get_ids("target");
    if (target.size() != 1) throw UsageError("--target expects one token id");
    const int64_t position = args.get_int("position", -1);
    if (args.has("position") && position < 0) throw UsageError("--position must be 0 or more");

    LoadedModel m = load_model_and_backend(args);
    Transformer transformer(*m.model, *m.backend);
    const Attribution a = attribute(transformer, tokens, target[0], position);
    nlohmann::json components = nlohmann::json::array();
    for (const AttributionComponent& c : a.components) components.push_back({{"name", c.name}, {"value", c.value}});
    const nlohmann::json out = {{"logit", a.logit}, {"components", components}};
    std::printf("%s\n", json_text(out).c_str());
    return 0;
}

}  // namespace

STRATA_COMMAND(Command{"attribute",
                       "--model PATH --tokens IDS --target ID [--position P] [--backend cpu|vulkan] [--device N] "
                       "[--threads N] [--exact] [--cpu-isa NAME]",
                       "direct logit attribution of the target's logit at a position to x0, every head and every "
                       "feed-forward, with the final norm's scale held fixed (JSON)",
                       run_attribute,
                       with_model_options({
                           {"tokens", "IDS", "the prompt as token ids"},
                           {"target", "ID", "the token whose logit is attributed"},
                           {"position", "P", "the position (default: the last)"},
                       })});

}  // namespace strata::cli
