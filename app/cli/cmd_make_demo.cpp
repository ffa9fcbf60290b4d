// strata-cli make-demo: writes the demonstration model (random weights, real Llama 3 tokenizer) in HF layout.
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "strata/demo.hpp"
#include "strata/model.hpp"

namespace fs = std::filesystem;

namespace strata::cli {
namespace {

// Where scripts/setup caches the tokenizer: $STRATA_CACHE_DIR, else ~/.cache/strata.
fs::path default_tokenizer() {
    fs::path cache;
    if (const char* c = std::getenv("STRATA_CACHE_DIR"); c && *c)
        cache = c;
    else if (const char* h = std::getenv("HOME"); h && *h)
        cache = fs::path(h) / ".cache" / "strata";
    else
        throw UsageError("neither STRATA_CACHE_DIR nor HOME is set: pass --tokenizer PATH");
    return cache / "tokenizer" / "tokenizer.json";
}

int run_make_demo(const Args& args) {
    args.allow_only({"out", "tokenizer", "seed"});
    const fs::path out = args.require("out");
    const fs::path tok = args.has("tokenizer") ? fs::path(args.require("tokenizer")) : default_tokenizer();
    DemoOptions options;
    options.seed = static_cast<uint64_t>(args.get_int("seed", static_cast<int64_t>(options.seed)));
    make_demo_model(out, tok, options);

    // Load what was written, so a broken demo is found here and not by the first person who opens it.
    const auto model = load_model(out);
    const nlohmann::json j = {{"path", out.string()},
                              {"demo", model->config.is_demo},
                              {"parameters", model->parameter_count()},
                              {"file_bytes", model->file_bytes()},
                              {"seed", options.seed}};
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
}

}  // namespace

STRATA_COMMAND(Command{"make-demo", "--out DIR [--tokenizer PATH] [--seed N]",
                       "write the demonstration model (Llama 3 architecture, random weights, real tokenizer)",
                       run_make_demo});

}  // namespace strata::cli
