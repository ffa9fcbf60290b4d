// strata-cli forward: one forward pass over a prompt; the top-k next tokens at every position as JSON, and with
// --dump DIR every captured tensor as float32 .npy ([T, n], named as in model.py). --ablate and --patch run the
// intervened pass instead (intervention.hpp): the top-k and the dump are of that pass.
#include <cmath>
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "model_args.hpp"
#include "strata/error.hpp"
#include "strata/intervention.hpp"
#include "strata/npy.hpp"
#include "strata/trace.hpp"

namespace strata::cli {
namespace {

namespace fs = std::filesystem;

// log(sum(exp(row))), for the probabilities of the listed tokens under the full softmax.
double log_sum_exp(const float* row, int64_t n) {
    double mx = -INFINITY;
    for (int64_t i = 0; i < n; ++i) mx = std::max(mx, double(row[i]));
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += std::exp(double(row[i]) - mx);
    return mx + std::log(s);
}

int run_forward(const Args& args) {
    auto keys = model_option_keys();
    keys.insert(keys.end(), {"tokens", "text", "dump", "top-k", "probs", "ablate", "patch", "patch-from-tokens",
                             "patch-from-text"});
    args.allow_only(keys);
    const int64_t top_k = args.get_int("top-k", 5);
    if (top_k < 1) throw UsageError("--top-k must be at least 1");
    if (args.has("probs") && !args.has("dump")) throw UsageError("--probs only adds to --dump");
    const bool from_tokens = args.has("patch-from-tokens"), from_text = args.has("patch-from-text");
    if (args.has("patch") && from_tokens == from_text)
        throw UsageError("--patch needs exactly one of --patch-from-tokens and --patch-from-text");
    if (!args.has("patch") && (from_tokens || from_text))
        throw UsageError("--patch-from-tokens / --patch-from-text only go with --patch");
    const auto dump = args.get("dump");
    if (dump && dump->empty()) throw UsageError("--dump needs a folder");

    LoadedModel m = load_model_and_backend(args);
    const Model& model = *m.model;
    const auto ids = prompt_ids(args, model);
    const auto T = static_cast<int64_t>(ids.size());
    const int64_t V = model.config.vocab_size;

    TraceRequest request;
    if (dump) {
        request = TraceRequest::everything();
        request.attention_probs = args.has("probs");  // T x T per head and layer: only when asked
    }
    request.logits_all_positions = true;
    request.keep_logits = true;
    request.top_k = top_k;

    Transformer transformer(model, *m.backend);
    if (args.has("ablate")) request.interventions = parse_ablations(args.require("ablate"), model.config);
    if (args.has("patch")) {
        // The donor: the other prompt's plain pass, keeping the patched sites.
        const auto specs = parse_patches(args.require("patch"), model.config);
        std::vector<int32_t> donor_ids;
        if (from_tokens) {
            donor_ids = args.get_ids("patch-from-tokens");
        } else {
            donor_ids = {model.config.bos_id};
            const auto body = model.tokenizer.encode(args.get_or("patch-from-text", ""));
            donor_ids.insert(donor_ids.end(), body.begin(), body.end());
        }
        TraceRequest donor_request;
        donor_request.residuals = false;
        donor_request.top_k = 0;
        for (const PatchSpec& p : specs) {
            if (p.position >= T)
                throw InputError("patch " + p.site + "@" + std::to_string(p.position) + ": position " +
                                 std::to_string(p.position) + " is not in the prompt (positions 0.." +
                                 std::to_string(T - 1) + ")");
            donor_request.names.insert(p.site);
        }
        KVCache donor_cache(*m.backend, model.config, std::max<int64_t>(static_cast<int64_t>(donor_ids.size()), 1));
        const Trace donor = transformer.prefill(donor_cache, donor_ids, donor_request);
        for (const PatchSpec& p : specs) request.interventions.push_back(patch_from(donor, p));
    }
    KVCache cache(*m.backend, model.config, std::max<int64_t>(T, 1));
    const Trace trace = transformer.prefill(cache, ids, request, catch_interrupts());

    const TracedTensor& logits = *trace.find("logits");  // [T, vocab]
    nlohmann::json positions = nlohmann::json::array();
    for (int64_t p = 0; p < T; ++p) {
        const float* row = logits.data.data() + p * V;
        const double lse = log_sum_exp(row, V);
        nlohmann::json top = nlohmann::json::array();
        for (const TokenScore& s : trace.top_k[static_cast<size_t>(p)])
            top.push_back({{"id", s.id},
                           {"logit", s.logit},
                           {"prob", std::exp(double(s.logit) - lse)},
                           {"text", model.tokenizer.decode({s.id})}});
        positions.push_back({{"position", p},
                             {"token", ids[static_cast<size_t>(p)]},
                             {"text", model.tokenizer.decode({ids[static_cast<size_t>(p)]})},
                             {"top_k", top}});
    }
    nlohmann::json out = {{"tokens", ids}, {"positions", positions}, {"model", model_json(model, *m.backend)}};
    if (!request.interventions.empty()) {
        nlohmann::json applied = nlohmann::json::array();
        for (const Intervention& iv : request.interventions)
            applied.push_back({{"label", iv.label}, {"site", iv.site}, {"position", iv.position}});
        out["interventions"] = applied;
    }

    if (dump) {
        const fs::path dir = *dump;
        fs::create_directories(dir);
        nlohmann::json files = nlohmann::json::array();
        for (const auto& [name, t] : trace.tensors) {
            const int64_t shape[2] = {t.rows, t.cols};
            const fs::path file = dir / (name + ".npy");
            write_npy(file, t.data, shape);
            files.push_back({{"name", name}, {"file", file.string()}, {"shape", {t.rows, t.cols}}});
        }
        out["dump"] = {{"dir", dir.string()}, {"files", files}};
    }
    std::printf("%s\n", json_text(out, 2).c_str());
    return 0;
}

}  // namespace

STRATA_COMMAND(Command{"forward",
                       "--model PATH (--tokens ID,ID,... | --text TEXT) [--backend cpu|vulkan] [--device N] "
                       "[--threads N] [--exact] [--cpu-isa NAME] [--top-k K] [--dump DIR [--probs]] [--ablate SPEC,...] "
                       "[--patch SITE@POS,... (--patch-from-tokens IDS | --patch-from-text TEXT)]",
                       "one forward pass: top-k next tokens at every position (JSON); --dump writes every "
                       "intermediate tensor as .npy",
                       run_forward,
                       with_model_options({
                           {"tokens", "ID,ID,...", "the prompt as token ids, used as given"},
                           {"text", "TEXT", "the prompt as text, after <|begin_of_text|>"},
                           {"top-k", "K", "next tokens listed per position (default 5)"},
                           {"dump", "DIR", "write every traced tensor into DIR as .npy, with an index"},
                           {"probs", "", "with --dump: also keep the attention probabilities (T x T per head)"},
                           {"ablate", "SPEC,...", "zero-ablate: layers.L, layers.L.attention, layers.L.attention.heads.H, "
                                                  "layers.L.feed_forward, layers.L.feed_forward.neurons.N"},
                           {"patch", "SITE@POS,...", "take the activation at SITE (h.L, layers.L.attention_out, "
                                                     "layers.L.ffn_out) and position POS from another prompt's pass"},
                           {"patch-from-tokens", "IDS", "the prompt --patch takes activations from, as token ids"},
                           {"patch-from-text", "TEXT", "the prompt --patch takes activations from, as text"},
                       })});

}  // namespace strata::cli
