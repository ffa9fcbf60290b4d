#pragma once
// Shared by the fuzz targets that go through the real loaders: one input split into files, a scratch folder
// under /dev/shm (memory, not disk), and the invariants every model that loads must satisfy.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

#include "strata/error.hpp"
#include "strata/model.hpp"

namespace strata::fuzz {

// Parts of one input separated by the line "@@": "a\n@@\nb" -> {"a", "b"}. A part that is not there is nullopt,
// so the fuzzer decides which files exist as well as what they hold.
inline std::vector<std::optional<std::string>> split(std::string_view in, size_t n) {
    constexpr std::string_view kSep = "\n@@\n";
    std::vector<std::optional<std::string>> parts(n);
    for (size_t i = 0; i < n; ++i) {
        if (i + 1 == n) {
            parts[i] = std::string(in);
            break;
        }
        const size_t at = in.find(kSep);
        if (at == std::string_view::npos) {
            parts[i] = std::string(in);
            break;
        }
        parts[i] = std::string(in.substr(0, at));
        in.remove_prefix(at + kSep.size());
    }
    return parts;
}

inline void check(bool ok) {
    if (!ok) __builtin_trap();
}

inline void write_file(const std::filesystem::path& p, std::string_view bytes) {
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    check(static_cast<bool>(f));  // /dev/shm full is a broken harness, not a finding
}

// Writes `bytes` to `p`, or removes `p` when the part is absent.
inline void put(const std::filesystem::path& p, const std::optional<std::string>& bytes) {
    std::error_code ec;
    if (bytes) write_file(p, *bytes);
    else std::filesystem::remove(p, ec);
}

// A fresh folder for this process (several fuzzers may run side by side with -jobs), removed when the fuzzer
// exits normally (after a crash it stays, beside the crashing input).
inline std::filesystem::path scratch(const std::string& name) {
    static std::filesystem::path process_dir;
    const std::filesystem::path base = std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
    process_dir = base / ("strata-fuzz-" + std::to_string(getpid()));
    const std::filesystem::path dir = process_dir / name;
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    std::atexit([] {
        std::error_code ec;
        std::filesystem::remove_all(process_dir, ec);
    });
    return dir;
}

// What load_model promises about a model it returns: a valid config, every tensor the config asks for with
// bytes that lie inside one of the model's mapped files and hold exactly its dtype and shape. Every row is read
// (the tensors here are tiny), so a view that points outside its file faults under the fuzzer.
inline void check_model(const Model& m) {
    try {
        m.config.validate();
        m.validate_shapes();
    } catch (const Error&) {
        __builtin_trap();  // load_model returned a model that its own checks refuse
    }
    check(m.tokenizer.vocab_size() <= m.config.vocab_size);
    std::vector<float> row;
    for (const auto& [name, t] : m.tensors) {
        bool inside = false;
        for (const MappedFile& f : m.files)
            if (t.data >= f.data() && t.nbytes <= f.size() && static_cast<uint64_t>(t.data - f.data()) <= f.size() - t.nbytes)
                inside = true;
        check(inside);
        check(t.nbytes == dtype_bytes(t.dtype, t.numel()));
        if (t.numel() > (1 << 16) || t.shape.empty() || t.shape.size() > 2) continue;
        row.resize(static_cast<size_t>(t.cols()));
        const int64_t rows = t.shape.size() == 2 ? t.rows() : 1;
        for (int64_t r = 0; r < rows; ++r) t.row_to_f32(r, row.data());
    }
}

// Meta's tokenizer.model for the 256 single bytes (Meta's code adds 256 specials: a vocabulary of 512).
inline std::string byte_ranks() {
    static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string ranks;
    for (int b = 0; b < 256; ++b) ranks += std::string{k[b >> 2], k[(b & 3) << 4], '=', '='} + " " + std::to_string(b) + "\n";
    return ranks;
}

}  // namespace strata::fuzz
