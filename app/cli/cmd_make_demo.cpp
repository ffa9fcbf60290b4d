// strata-cli make-demo: writes the demonstration model (the tiny trained Llama 3 embedded in the engine, or with
// --random today's random-weights model; the real Llama 3 tokenizer) in HF layout.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "strata/demo.hpp"
#include "strata/model.hpp"

namespace fs = std::filesystem;

namespace strata::cli {
namespace {

// The Llama 3 tokenizer, looked for where scripts/setup caches it ($STRATA_CACHE_DIR, else ~/.cache/strata) and
// where the package installs it (share/strata beside the executable's bin/, then /usr/share/strata).
fs::path default_tokenizer() {
    std::vector<fs::path> candidates;
    if (const char* c = std::getenv("STRATA_CACHE_DIR"); c && *c) candidates.push_back(fs::path(c) / "tokenizer" / "tokenizer.json");
    if (const char* h = std::getenv("HOME"); h && *h)
        candidates.push_back(fs::path(h) / ".cache" / "strata" / "tokenizer" / "tokenizer.json");
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) candidates.push_back(exe.parent_path().parent_path() / "share" / "strata" / "tokenizer.json");
    candidates.push_back("/usr/share/strata/tokenizer.json");
    std::string tried;
    for (const fs::path& p : candidates) {
        if (fs::is_regular_file(p, ec)) return p;
        tried += (tried.empty() ? "" : ", ") + p.string();
    }
    throw UsageError("no Llama 3 tokenizer.json found (looked in " + tried +
                     "): pass --tokenizer PATH, run scripts/setup, or install the strata package");
}

int run_make_demo(const Args& args) {
    args.allow_only({"out", "tokenizer", "seed", "random"});
    const fs::path out = args.require("out");
    const fs::path tok = args.has("tokenizer") ? fs::path(args.require("tokenizer")) : default_tokenizer();
    DemoOptions options;
    options.random = args.has("random");
    if (args.has("seed") && !options.random) throw UsageError("--seed is the seed of --random's weights");
    options.seed = static_cast<uint64_t>(args.get_int("seed", static_cast<int64_t>(options.seed)));
    make_demo_model(out, tok, options);

    // Load what was written, so a broken demo is found here and not by the first person who opens it.
    const auto model = load_model(out);
    const nlohmann::json j = {{"path", out.string()},
                              {"demo", model->config.is_demo},
                              {"trained", model->config.demo_trained},
                              {"description", model->config.demo_description},
                              {"parameters", model->parameter_count()},
                              {"file_bytes", model->file_bytes()},
                              {"seed", options.random ? nlohmann::json(options.seed) : nlohmann::json(nullptr)}};
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
}

}  // namespace

STRATA_COMMAND(Command{"make-demo", "--out DIR [--tokenizer PATH] [--random [--seed N]]",
                       "write the demonstration model (a tiny trained Llama 3, real tokenizer; --random: random "
                       "weights)",
                       run_make_demo,
                       {{"out", "DIR", "the folder to write (created)"},
                        {"tokenizer", "PATH", "the Llama 3 tokenizer.json (default: the cached or installed one)"},
                        {"random", "", "random weights instead of the trained model (for tests)"},
                        {"seed", "N", "with --random: the seed of the random weights (default 20240418)"}}});

}  // namespace strata::cli
