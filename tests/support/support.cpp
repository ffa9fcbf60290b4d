#include "support.hpp"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace strata::test {

fs::path reference_dir() {
    if (const char* e = std::getenv("STRATA_REFERENCE_DIR")) return e;
    return STRATA_REFERENCE_DIR;
}

fs::path tokenizer_json() {
    fs::path p = fs::path(STRATA_CACHE_DIR) / "tokenizer" / "tokenizer.json";
    if (const char* e = std::getenv("STRATA_TOKENIZER_JSON")) p = e;
    if (!fs::exists(p))
        throw std::runtime_error("tokenizer.json not found at " + p.string() + ": run scripts/setup first");
    return p;
}

nlohmann::json expected() {
    std::ifstream f(reference_dir() / "expected.json");
    if (!f) throw std::runtime_error("cannot read " + (reference_dir() / "expected.json").string());
    return nlohmann::json::parse(f);
}

namespace {
struct TempRoot {
    fs::path root;
    TempRoot() {
        root = fs::path(STRATA_BINARY_DIR) / "tmp" / ("run-" + std::to_string(::getpid()));
        fs::remove_all(root);
        fs::create_directories(root);
    }
    ~TempRoot() {
        std::error_code ec;
        fs::remove_all(root, ec);
    }
};
TempRoot& temp_root() {
    static TempRoot r;
    return r;
}
}  // namespace

CpuHugePages::CpuHugePages(const char* mode) { setenv("STRATA_CPU_HUGE_PAGES", mode, 1); }
CpuHugePages::~CpuHugePages() { unsetenv("STRATA_CPU_HUGE_PAGES"); }

fs::path temp_dir(const std::string& tag) {
    static std::atomic<int> counter{0};
    fs::path p = temp_root().root / (tag + "-" + std::to_string(counter++));
    fs::create_directories(p);
    return p;
}

fs::path golden_hf_dir() {
    static std::mutex m;
    static fs::path dir;
    std::lock_guard<std::mutex> lock(m);
    if (dir.empty()) {
        fs::path d = temp_dir("golden-hf");
        for (const char* f : {"config.json", "generation_config.json", "model.safetensors"})
            fs::create_symlink(reference_dir() / "model" / f, d / f);
        fs::create_symlink(tokenizer_json(), d / "tokenizer.json");
        dir = d;
    }
    return dir;
}

double rel_l2(std::span<const float> a, std::span<const float> b) {
    if (a.size() != b.size()) return INFINITY;
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        double d = double(a[i]) - double(b[i]);
        num += d * d;
        den += double(b[i]) * double(b[i]);
    }
    if (den == 0) return num == 0 ? 0 : INFINITY;
    return std::sqrt(num / den);
}

bool all_finite(std::span<const float> a) {
    for (float x : a)
        if (!std::isfinite(x)) return false;
    return true;
}

void write_file(const fs::path& p, std::string_view bytes) {
    std::ofstream f(p, std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!f) throw std::runtime_error("cannot write " + p.string());
}

std::string read_file(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    if (!f) throw std::runtime_error("cannot read " + p.string());
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

fs::path cli_path() { return fs::path(STRATA_BINARY_DIR) / "app" / "strata-cli"; }

std::string quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

std::string ids_arg(const std::vector<int32_t>& ids) {
    std::string s;
    for (int32_t id : ids) s += (s.empty() ? "" : ",") + std::to_string(id);
    return s;
}

CliResult run_cli(const std::string& args) {
    if (!fs::exists(cli_path())) throw std::runtime_error("build the strata-cli target too: " + cli_path().string());
    const fs::path err = temp_dir("cli") / "stderr.txt";
    const std::string cmd = quote(cli_path().string()) + " " + args + " 2>" + quote(err.string());
    CliResult r;
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) throw std::runtime_error("popen failed: " + cmd);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    const int st = pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r.err = read_file(err);
    return r;
}

}  // namespace strata::test
