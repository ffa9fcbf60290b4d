// strata-cli generate: continue a prompt (token ids, plain text, or a chat message through the Llama 3 template),
// streaming the text to stdout as it comes, or with --json printing {"ids": [...], "text": "..."} at the end.
#include <chrono>
#include <cstdio>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "model_args.hpp"
#include "strata/generate.hpp"

namespace strata::cli {
namespace {

int run_generate(const Args& args) {
    auto keys = model_option_keys();
    keys.insert(keys.end(), {"tokens", "text", "chat", "system", "max-tokens", "temperature", "top-k", "top-p",
                             "min-p", "seed", "json", "kv-cache"});
    args.allow_only(keys);
    const int inputs = int(args.has("tokens")) + int(args.has("text")) + int(args.has("chat"));
    if (inputs != 1) throw UsageError("give exactly one of --tokens, --text and --chat");
    if (args.has("system") && !args.has("chat")) throw UsageError("--system goes with --chat");

    GenerateOptions options;
    options.max_tokens = args.get_int("max-tokens", 128);
    if (options.max_tokens < 0) throw UsageError("--max-tokens must not be negative");
    options.sampler.temperature = static_cast<float>(args.get_double("temperature", 0.0));
    options.sampler.top_k = args.get_int("top-k", 0);
    options.sampler.top_p = static_cast<float>(args.get_double("top-p", 1.0));
    options.sampler.min_p = static_cast<float>(args.get_double("min-p", 0.0));
    options.sampler.seed = static_cast<uint64_t>(args.get_int("seed", 0));
    const SamplerSettings& s = options.sampler;
    if (s.temperature < 0) throw UsageError("--temperature must not be negative");
    if (s.top_k < 0) throw UsageError("--top-k must not be negative");
    if (!(s.top_p > 0 && s.top_p <= 1)) throw UsageError("--top-p must be in (0, 1]");
    if (!(s.min_p >= 0 && s.min_p <= 1)) throw UsageError("--min-p must be in [0, 1]");
    // The per-token trace is not shown here: keep nothing beyond the logits sampling needs.
    options.trace.residuals = false;
    options.trace.top_k = 0;
    const bool json = args.has("json");
    const KvCacheType kv_cache = kv_cache_option(args);

    LoadedModel m = load_model_and_backend(args, /*integer_dot=*/true);
    const Model& model = *m.model;
    std::vector<int32_t> prompt;
    if (args.has("chat")) {
        std::vector<ChatMessage> messages;
        if (args.has("system")) messages.push_back({"system", args.get_or("system", "")});
        messages.push_back({"user", args.get_or("chat", "")});
        prompt = chat_tokens(model.tokenizer, messages);
        if (!model.config.is_instruct && !model.config.is_demo && !json)
            std::fprintf(stderr, "note: %s is not an instruct model; it was not trained on the chat template\n",
                         model.config.name.c_str());
    } else {
        prompt = prompt_ids(args, model);
    }
    if (model.config.is_demo && !json)
        std::fprintf(stderr, model.config.demo_trained
                                 ? "note: this is Strata's demonstration model, a tiny Llama 3 trained on generated "
                                   "English: it knows only simple stories, facts, sums and chats\n"
                                 : "note: this is Strata's demonstration model (random weights): its text is noise\n");

    // A cache for the prompt and what may follow, within the model's context.
    const int64_t context = std::min<int64_t>(model.config.max_seq_len,
                                              static_cast<int64_t>(prompt.size()) + std::max<int64_t>(options.max_tokens, 1));
    Session session(model, *m.backend, context, kv_cache);
    const std::atomic<bool>* interrupted = catch_interrupts();
    const auto t0 = std::chrono::steady_clock::now();
    session.feed(prompt, {}, interrupted);
    const auto t1 = std::chrono::steady_clock::now();

    std::vector<int32_t> ids;
    std::string text;
    StreamDecoder decoder(model.tokenizer);  // this command's own, so that the tail can be flushed at the end
    auto emit = [&](const std::string& piece) {
        text += piece;
        if (!json && !piece.empty()) {
            std::fwrite(piece.data(), 1, piece.size(), stdout);
            std::fflush(stdout);
        }
    };
    StopReason reason = StopReason::MaxTokens;
    if (options.max_tokens > 0)
        reason = session.generate(options, [&](const GeneratedToken& g) {
            ids.push_back(g.id);
            emit(decoder.push(g.id));
            return true;
        }, interrupted);
    emit(decoder.flush());
    const auto t2 = std::chrono::steady_clock::now();
    const double prefill_s = std::chrono::duration<double>(t1 - t0).count();
    const double decode_s = std::chrono::duration<double>(t2 - t1).count();
    const double tok_s = ids.empty() || decode_s <= 0 ? 0.0 : double(ids.size()) / decode_s;

    if (json) {
        const nlohmann::json out = {{"ids", ids},
                                    {"text", text},
                                    {"stop_reason", stop_reason_name(reason)},
                                    {"demo", model.config.is_demo},
                                    {"prompt_tokens", prompt.size()},
                                    {"prefill_seconds", prefill_s},
                                    {"decode_tokens_per_second", tok_s},
                                    {"model", model_json(model, *m.backend)}};
        std::printf("%s\n", json_text(out).c_str());
    } else {
        if (isatty(STDOUT_FILENO)) std::fputc('\n', stdout);
        std::fprintf(stderr, "[%zu prompt tokens, %zu generated, %.2f tokens/s, stop: %s]\n", prompt.size(),
                     ids.size(), tok_s, std::string(stop_reason_name(reason)).c_str());
    }
    // Ctrl-C: what was generated is printed above; the status says it was interrupted.
    return reason == StopReason::Cancelled ? 130 : 0;
}

}  // namespace

STRATA_COMMAND(Command{"generate",
                       "--model PATH (--tokens ID,ID,... | --text TEXT | --chat MESSAGE [--system TEXT]) "
                       "[--max-tokens N] [--temperature T] [--top-k K] [--top-p P] [--min-p M] [--seed S] "
                       "[--backend cpu|vulkan] [--device N] [--threads N] [--exact] [--cpu-isa NAME] "
                       "[--kv-cache f32|f16] [--json]",
                       "generate text: streamed to stdout, or {\"ids\", \"text\"} with --json", run_generate,
                       with_model_options({
                           {"tokens", "ID,ID,...", "the prompt as token ids (plain completion)"},
                           {"text", "TEXT", "the prompt as text after <|begin_of_text|> (plain completion)"},
                           {"chat", "MESSAGE", "a user message in the Llama 3 instruct chat template"},
                           {"system", "TEXT", "with --chat: a system message before it"},
                           {"max-tokens", "N", "the most tokens to generate (default 128)"},
                           {"temperature", "T", "sampling temperature; 0 is greedy (default 0)"},
                           {"top-k", "K", "keep the K most likely tokens; 0 keeps all (default 0)"},
                           {"top-p", "P", "keep the smallest set of tokens whose probability reaches P (default 1)"},
                           {"min-p", "M", "drop tokens below M times the top probability (default 0)"},
                           {"seed", "S", "the sampler's seed (default 0)"},
                           {"json", "", "print {\"ids\", \"text\"} at the end instead of streaming"},
                           {"kv-cache", "f32|f16", kv_cache_help()},
                       })});

}  // namespace strata::cli
