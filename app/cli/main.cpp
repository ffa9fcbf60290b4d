// strata-cli: dispatch to the registered subcommands; turn engine errors into a message and an exit status.
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
void print_help(std::FILE* f) {
    std::fprintf(f, "strata-cli %s: the Strata engine from the command line (JSON out)\n\n", STRATA_VERSION);
    std::fprintf(f, "usage: strata-cli COMMAND [OPTIONS]\n\ncommands:\n");
    for (const auto& [name, c] : strata::cli::commands())
        std::fprintf(f, "  %-11s %s\n  %-11s   %s\n", name.c_str(), c.summary, "", c.usage);
    std::fprintf(f, "\n  --help     this text\n  --version  the version\n");
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
            std::printf("usage: strata-cli %s %s\n  %s\n", it->second.name, it->second.usage, it->second.summary);
            return 0;
        }
        return it->second.run(args);
    } catch (const strata::cli::UsageError& e) {
        std::fprintf(stderr, "error: %s\nusage: strata-cli %s %s\n", e.what(), it->second.name, it->second.usage);
        return 2;
    } catch (const strata::Cancelled&) {
        std::fprintf(stderr, "cancelled\n");
        return 130;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}
