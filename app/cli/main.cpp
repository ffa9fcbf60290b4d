// strata-cli: dispatch to the registered subcommands; turn engine errors into a message and an exit status.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <set>
#include <stdexcept>

#include "command.hpp"
#include "strata/error.hpp"

namespace strata::cli {

namespace {
std::map<std::string, Command>& registry() {
    static std::map<std::string, Command> r;
    return r;
}
}  // namespace

bool register_command(const Command& c) {
    registry()[c.name] = c;
    return true;
}
const std::map<std::string, Command>& commands() { return registry(); }

namespace {
std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the SIGINT handler stores into it");
extern "C" void on_sigint(int) { g_interrupted.store(true); }
}  // namespace

const std::atomic<bool>* catch_interrupts() {
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;  // the second Ctrl-C gets the default action: the process ends
    sigaction(SIGINT, &sa, nullptr);
    return &g_interrupted;
}

Args::Args(int argc, char** argv, int first) {
    for (int i = first; i < argc; ++i) {
        std::string a = argv[i];
        if (a.rfind("--", 0) != 0) throw UsageError("unexpected argument '" + a + "' (options start with --)");
        std::string key = a.substr(2);
        std::string value;
        if (auto eq = key.find('='); eq != std::string::npos) {
            value = key.substr(eq + 1);
            key = key.substr(0, eq);
        } else if (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) {
            value = argv[++i];
        }
        values_[key] = value;
        order_.push_back(key);
    }
}
bool Args::has(const std::string& key) const { return values_.count(key) != 0; }
std::optional<std::string> Args::get(const std::string& key) const {
    auto it = values_.find(key);
    if (it == values_.end()) return std::nullopt;
    return it->second;
}
std::string Args::require(const std::string& key) const {
    auto v = get(key);
    if (!v || v->empty()) throw UsageError("missing --" + key);
    return *v;
}
std::string Args::get_or(const std::string& key, const std::string& fallback) const {
    auto v = get(key);
    return v ? *v : fallback;
}
int64_t Args::get_int(const std::string& key, int64_t fallback) const {
    auto v = get(key);
    if (!v) return fallback;
    try {
        size_t used = 0;
        long long x = std::stoll(*v, &used);
        if (used != v->size()) throw std::invalid_argument("trailing");
        return x;
    } catch (const std::exception&) {
        throw UsageError("--" + key + " expects an integer, got '" + *v + "'");
    }
}
double Args::get_double(const std::string& key, double fallback) const {
    auto v = get(key);
    if (!v) return fallback;
    try {
        size_t used = 0;
        double x = std::stod(*v, &used);
        if (used != v->size()) throw std::invalid_argument("trailing");
        return x;
    } catch (const std::exception&) {
        throw UsageError("--" + key + " expects a number, got '" + *v + "'");
    }
}
std::vector<int32_t> Args::get_ids(const std::string& key) const {
    std::string s = require(key);
    std::vector<int32_t> ids;
    size_t pos = 0;
    while (pos <= s.size()) {
        size_t comma = s.find(',', pos);
        std::string part = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        // Allow spaces around ids ("1, 2, 3").
        while (!part.empty() && part.front() == ' ') part.erase(part.begin());
        while (!part.empty() && part.back() == ' ') part.pop_back();
        if (part.empty()) throw UsageError("--" + key + ": empty id in '" + s + "'");
        try {
            size_t used = 0;
            long long x = std::stoll(part, &used);
            if (used != part.size() || x < INT32_MIN || x > INT32_MAX) throw std::invalid_argument("bad");
            ids.push_back(static_cast<int32_t>(x));
        } catch (const std::exception&) {
            throw UsageError("--" + key + ": '" + part + "' is not an integer id");
        }
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    return ids;
}
void Args::allow_only(const std::vector<std::string>& keys) const {
    std::set<std::string> ok(keys.begin(), keys.end());
    for (const auto& k : order_)
        if (!ok.count(k)) throw UsageError("unknown option --" + k);
}

}  // namespace strata::cli

namespace {

using strata::cli::Command;
using strata::cli::Option;

// The environment and files the man page documents; the commands and options come from the registry.
struct Note {
    const char* name;
    const char* text;
};
const Note kEnvironment[] = {
    {"STRATA_CACHE_DIR", "where scripts/setup caches the Llama 3 tokenizer (tokenizer/tokenizer.json); default "
                         "~/.cache/strata"},
    {"VK_DRIVER_FILES, VK_ICD_FILENAMES", "the Vulkan loader's choice of drivers (for example Mesa's lavapipe)"},
    {"STRATA_VK_VALIDATION", "1 turns the Khronos validation layer on"},
};
const Note kFiles[] = {
    {"/usr/share/strata/tokenizer.json", "the Llama 3 tokenizer installed with the package; make-demo uses it when "
                                         "no --tokenizer is given and none is cached"},
    {"~/.cache/strata/tokenizer/tokenizer.json", "the tokenizer fetched by scripts/setup in a source checkout"},
};

void print_options(std::FILE* f, const Command& c) {
    for (const Option& o : c.options) {
        std::string flag = std::string("--") + o.name;
        if (*o.arg) flag += std::string(" ") + o.arg;
        if (flag.size() <= 22)
            std::fprintf(f, "      %-22s %s\n", flag.c_str(), o.help);
        else
            std::fprintf(f, "      %s\n      %-22s %s\n", flag.c_str(), "", o.help);
    }
}

void print_command_help(std::FILE* f, const Command& c) {
    std::fprintf(f, "usage: strata-cli %s %s\n  %s\n", c.name, c.usage, c.summary);
    if (!c.options.empty()) {
        std::fprintf(f, "\noptions:\n");
        print_options(f, c);
    }
}

void print_help(std::FILE* f) {
    std::fprintf(f, "strata-cli %s: the Strata engine from the command line (JSON out)\n\n", STRATA_VERSION);
    std::fprintf(f, "usage: strata-cli COMMAND [OPTIONS]\n       strata-cli COMMAND --help\n\ncommands:\n");
    for (const auto& [name, c] : strata::cli::commands()) {
        std::fprintf(f, "  %s%s%s\n      %s\n", name.c_str(), *c.usage ? " " : "", c.usage, c.summary);
        print_options(f, c);
        std::fprintf(f, "\n");
    }
    std::fprintf(f, "  --help     this text\n  --version  the version\n");
}

// roff text: backslashes and hyphens escaped, a leading dot or quote made literal.
std::string roff(const std::string& s) {
    std::string out;
    for (char ch : s) {
        if (ch == '\\') out += "\\e";
        else if (ch == '-') out += "\\-";
        else out += ch;
    }
    if (!out.empty() && (out[0] == '.' || out[0] == '\'')) out.insert(0, "\\&");
    return out;
}

// The man page strata-cli(1), written at build time from the same command table as --help.
void print_man(std::FILE* f) {
    std::fprintf(f, ".TH STRATA\\-CLI 1 \"\" \"strata-cli %s\" \"User Commands\"\n", STRATA_VERSION);
    std::fprintf(f, ".SH NAME\nstrata\\-cli \\- look inside Llama 3 from the command line (JSON out)\n");
    std::fprintf(f, ".SH SYNOPSIS\n.B strata\\-cli\n.I COMMAND\n[\\fIOPTIONS\\fR]\n.br\n.B strata\\-cli\n"
                    ".I COMMAND\n.B \\-\\-help\n");
    std::fprintf(f, ".SH DESCRIPTION\n%s\n",
                 roff("strata-cli runs the same engine as the Strata desktop explorer: it reads Llama 3, 3.1 and 3.2 "
                      "checkpoints (Hugging Face folders, Meta folders, GGUF files), runs the forward pass on the CPU "
                      "or through Vulkan, and prints JSON. Errors are one line on standard error and a non-zero "
                      "exit status.")
                     .c_str());
    std::fprintf(f, ".SH COMMANDS\n");
    for (const auto& [name, c] : strata::cli::commands()) {
        std::fprintf(f, ".TP\n.B %s\n%s\n.br\n%s\n", roff(name).c_str(), roff(c.usage).c_str(), roff(c.summary).c_str());
        if (!c.options.empty()) {
            std::fprintf(f, ".RS\n");
            for (const Option& o : c.options) {
                std::fprintf(f, ".TP\n.B \\-\\-%s", roff(o.name).c_str());
                if (*o.arg) std::fprintf(f, " \\fI%s\\fR", roff(o.arg).c_str());
                std::fprintf(f, "\n%s\n", roff(o.help).c_str());
            }
            std::fprintf(f, ".RE\n");
        }
    }
    std::fprintf(f, ".SH OPTIONS\n.TP\n.B \\-\\-help\nthe commands and their options\n.TP\n.B \\-\\-version\n"
                    "the version\n");
    std::fprintf(f, ".SH ENVIRONMENT\n");
    for (const Note& n : kEnvironment) std::fprintf(f, ".TP\n.B %s\n%s\n", roff(n.name).c_str(), roff(n.text).c_str());
    std::fprintf(f, ".SH FILES\n");
    for (const Note& n : kFiles) std::fprintf(f, ".TP\n.I %s\n%s\n", roff(n.name).c_str(), roff(n.text).c_str());
    std::fprintf(f, ".SH EXIT STATUS\n0 on success, 1 on an error, 2 on a usage error, 130 when cancelled.\n");
    std::fprintf(f, ".SH SEE ALSO\n.BR strata (1)\n");
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        print_help(stderr);
        return 2;
    }
    std::string name = argv[1];
    if (name == "--help" || name == "-h" || name == "help") {
        print_help(stdout);
        return 0;
    }
    if (name == "--help-man") {  // hidden: the build writes strata-cli.1 with it
        print_man(stdout);
        return 0;
    }
    if (name == "--version") {
        std::printf("strata-cli %s\n", STRATA_VERSION);
        return 0;
    }
    const auto& cmds = strata::cli::commands();
    auto it = cmds.find(name);
    if (it == cmds.end()) {
        std::fprintf(stderr, "error: unknown command '%s' (strata-cli --help lists them)\n", name.c_str());
        return 2;
    }
    try {
        strata::cli::Args args(argc, argv, 2);
        if (args.has("help")) {
            print_command_help(stdout, it->second);
            return 0;
        }
        return it->second.run(args);
    } catch (const strata::cli::UsageError& e) {
        std::fprintf(stderr, "error: %s\nusage: strata-cli %s %s\n", e.what(), it->second.name, it->second.usage);
        return 2;
    } catch (const strata::Cancelled&) {
        std::fprintf(stderr, "cancelled\n");
        return 130;
    } catch (const strata::DeviceError& e) {
        std::fprintf(stderr, "error: %s\n  (--backend cpu runs without Vulkan; `strata-cli devices` lists what Vulkan sees)\n",
                     e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}
