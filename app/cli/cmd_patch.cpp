// strata-cli patch: the activation-patching sweep (causal tracing). For every layer L and position p, the corrupt
// prompt's pass with the clean prompt's activation at (site of L, p) patched in, measured by
// logit[answer] - logit[foil] at the last position. JSON: {"clean": c, "corrupt": k, "effect": [[...] x n_layers]}.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "model_args.hpp"
#include "strata/causal.hpp"

namespace strata::cli {
namespace {

int32_t token_arg(const Args& args, const char* key) {
    const auto ids = args.get_ids(key);
    if (ids.size() != 1) throw UsageError(std::string("--") + key + " expects one token id");
    return ids[0];
}

int run_patch(const Args& args) {
    auto keys = model_option_keys();
    keys.insert(keys.end(), {"clean-tokens", "corrupt-tokens", "answer", "foil", "site"});
    args.allow_only(keys);
    const auto clean = args.get_ids("clean-tokens");
    const auto corrupt = args.get_ids("corrupt-tokens");
    const int32_t answer = token_arg(args, "answer"), foil = token_arg(args, "foil");
    PatchSweepOptions options;
    options.site = parse_patch_site_kind(args.get_or("site", "h"));
    options.cancel = catch_interrupts();

    LoadedModel m = load_model_and_backend(args);
    Transformer transformer(*m.model, *m.backend);
    const PatchSweep sweep = patch_sweep(transformer, clean, corrupt, answer, foil, options);
    const nlohmann::json out = {{"clean", sweep.clean}, {"corrupt", sweep.corrupt}, {"effect", sweep.effect}};
    std::printf("%s\n", json_text(out).c_str());
    return 0;
}

}  // namespace

STRATA_COMMAND(Command{"patch",
                       "--model PATH --clean-tokens IDS --corrupt-tokens IDS --answer ID --foil ID "
                       "[--site h|attention_out|ffn_out] [--backend cpu|vulkan] [--device N] [--threads N] [--exact] [--cpu-isa NAME]",
                       "activation patching sweep: the corrupt run with each (layer, position) of the clean run "
                       "patched in, metric logit[answer] - logit[foil] at the last position (JSON)",
                       run_patch,
                       with_model_options({
                           {"clean-tokens", "IDS", "the clean prompt as token ids"},
                           {"corrupt-tokens", "IDS", "the corrupt prompt, the same number of tokens"},
                           {"answer", "ID", "the token the clean prompt should predict"},
                           {"foil", "ID", "the token the corrupt prompt should predict"},
                           {"site", "h|attention_out|ffn_out",
                            "what is patched: the residual after block L (default), or a branch's output"},
                       })});

}  // namespace strata::cli
