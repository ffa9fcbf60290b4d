#pragma once
// strata-cli's subcommands: each .cpp in app/cli registers one with STRATA_COMMAND. Output is JSON on stdout;
// errors are one line on stderr ("error: ...") and a non-zero exit status.
#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace strata::cli {

// "--key value" options and "--flag" switches, in order of appearance.
class Args {
public:
    Args(int argc, char** argv, int first);
    bool has(const std::string& key) const;                 // --flag or --key value present
    std::optional<std::string> get(const std::string& key) const;
    std::string require(const std::string& key) const;     // throws UsageError when missing
    std::string get_or(const std::string& key, const std::string& fallback) const;
    int64_t get_int(const std::string& key, int64_t fallback) const;
    double get_double(const std::string& key, double fallback) const;
    // Comma-separated integers ("128000,9906,1917"); throws UsageError on anything else.
    std::vector<int32_t> get_ids(const std::string& key) const;
    // Fails with UsageError if an option other than these was given (typos must not be silently ignored).
    void allow_only(const std::vector<std::string>& keys) const;

private:
    std::map<std::string, std::string> values_;
    std::vector<std::string> order_;
};

struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// One option of a command, for `strata-cli COMMAND --help`, `strata-cli --help` and the man page.
struct Option {
    const char* name;  // "model" for --model
    const char* arg;   // "PATH"; "" for a switch
    const char* help;  // one line
};

// The options the commands that run a model share (see model_args.hpp).
inline const std::vector<Option>& model_options() {
    static const std::vector<Option> o{
        {"model", "PATH", "a Hugging Face or Meta folder, or a .gguf file"},
        {"backend", "cpu|vulkan", "where the forward pass runs (default cpu)"},
        {"device", "N", "the Vulkan device, as `strata-cli devices` numbers them (default: the best one)"},
        {"threads", "N", "CPU threads (0 = all cores; default 0)"},
        {"exact", "", "CPU: exact float32 products for quantized and F16 weights too (the default of forward, "
                      "patch and attribute; generate and bench otherwise use 8-bit integer dot products for block "
                      "types and binary16 activations for F16 decode, as llama.cpp does; F32/BF16 are exact "
                      "either way)"},
        {"cpu-isa", "NAME", "CPU kernels: generic, avx2, avx512-vnni or avx-vnni (default: the best this CPU has)"},
    };
    return o;
}

// The shared model options followed by a command's own.
inline std::vector<Option> with_model_options(std::vector<Option> own) {
    std::vector<Option> all = model_options();
    all.insert(all.end(), own.begin(), own.end());
    return all;
}

struct Command {
    const char* name;
    const char* usage;    // "--model PATH [--bos] ..."
    const char* summary;  // one line
    int (*run)(const Args&);
    std::vector<Option> options = {};  // described options; the usage line names them all
};

bool register_command(const Command& c);

// Ctrl-C for the commands that can stop cleanly: once this is called, the first SIGINT only sets the returned
// flag (the command stops at its next check, removes what it was writing, and exits 130 through Cancelled); a
// second SIGINT ends the process at once. Commands that do not call it keep the default: Ctrl-C ends them.
const std::atomic<bool>* catch_interrupts();
const std::map<std::string, Command>& commands();

}  // namespace strata::cli

#define STRATA_CONCAT_(a, b) a##b
#define STRATA_CONCAT(a, b) STRATA_CONCAT_(a, b)
#define STRATA_COMMAND(...) \
    static const bool STRATA_CONCAT(strata_cmd_registered_, __LINE__) = ::strata::cli::register_command(__VA_ARGS__)
