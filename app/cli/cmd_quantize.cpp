// strata-cli quantize: a checkpoint (Hugging Face, Meta or GGUF) as a quantized GGUF file that llama.cpp and other
// GGUF tools can read. Tensors are converted one batch of rows at a time while they are written; the file appears
// only when complete. The rules (which tensor gets which type, fallbacks) are in strata/quantize.hpp.
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "strata/error.hpp"
#include "strata/model.hpp"
#include "strata/quant.hpp"
#include "strata/quantize.hpp"
#include "strata/transformer.hpp"

namespace fs = std::filesystem;

namespace strata::cli {
namespace {

// "layers.7.attention.wv" -> "attention.wv": the class a tensor belongs to across layers.
std::string tensor_class(const std::string& name) {
    if (name.rfind("layers.", 0) != 0) return name;
    const size_t dot = name.find('.', 7);
    return dot == std::string::npos ? name : name.substr(dot + 1);
}

int run_quantize(const Args& args) {
    args.allow_only({"model", "out", "type", "threads"});
    const std::string model_path = args.require("model");
    const fs::path out = args.require("out");
    QuantScheme scheme;
    try {
        scheme = quant_scheme(args.require("type"));
    } catch (const InputError& e) {
        throw UsageError(std::string("--type: ") + e.what());
    }
    if (out.empty() || fs::is_directory(out)) throw UsageError("--out must name a file, not a folder: " + out.string());
    const fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
    if (!fs::is_directory(parent)) throw Error(out.string() + ": the folder " + parent.string() + " does not exist");
    const int threads = static_cast<int>(args.get_int("threads", 0));

    const auto model = load_model(model_path);
    check_weights_finite(*model);
    const std::vector<TensorPlan> plan = quant_plan(*model, scheme);

    // What was chosen, per tensor class: {class: {type: count}}, and the reasons that are not "base type".
    std::map<std::string, std::map<std::string, int>> chosen;
    std::map<std::string, std::map<std::string, int>> reasons;
    uint64_t in_bytes = 0, out_bytes = 0, weights = 0;
    for (const TensorPlan& p : plan) {
        const std::string cls = tensor_class(p.name);
        ++chosen[cls][std::string(dtype_name(p.to))];
        if (p.reason != "base type") ++reasons[cls][p.reason];
        const TensorView& t = model->tensor(p.name);
        in_bytes += t.nbytes;
        out_bytes += dtype_bytes(p.to, t.cols()) * static_cast<uint64_t>(t.shape.size() < 2 ? 1 : t.rows());
        weights += static_cast<uint64_t>(t.numel());
    }
    for (const auto& [cls, types] : chosen) {
        std::string line;
        for (const auto& [type, n] : types) line += (line.empty() ? "" : ", ") + type + " x" + std::to_string(n);
        std::string why;
        if (auto it = reasons.find(cls); it != reasons.end())
            for (const auto& [r, n] : it->second) why += "; " + r + " (" + std::to_string(n) + ")";
        std::fprintf(stderr, "quantize: %-16s %s%s\n", cls.c_str(), line.c_str(), why.c_str());
    }

    write_quantized_gguf(*model, out, scheme, plan, threads,
                         [](const std::string& name, DType to, int64_t done, int64_t total) {
                             std::fprintf(stderr, "\rquantize: %lld/%lld %s -> %s          ",
                                          static_cast<long long>(done + 1), static_cast<long long>(total),
                                          name.c_str(), std::string(dtype_name(to)).c_str());
                             if (done + 1 == total) std::fprintf(stderr, "\n");
                         },
                         catch_interrupts());

    nlohmann::json tensors = nlohmann::json::object();
    for (const auto& [cls, types] : chosen) {
        tensors[cls] = {{"types", types}};
        if (auto it = reasons.find(cls); it != reasons.end()) tensors[cls]["reasons"] = it->second;
    }
    const nlohmann::json result = {
        {"model", model_path},
        {"out", out.string()},
        {"type", scheme.name},
        {"file_type", scheme.file_type},
        {"input_bytes", in_bytes},
        {"output_tensor_bytes", out_bytes},
        {"output_file_bytes", fs::file_size(out)},
        {"bits_per_weight", weights ? 8.0 * static_cast<double>(out_bytes) / static_cast<double>(weights) : 0.0},
        {"tensors", tensors},
    };
    std::printf("%s\n", result.dump(2).c_str());
    return 0;
}

}  // namespace

STRATA_COMMAND(Command{"quantize", "--model PATH --out FILE.gguf --type Q8_0|Q4_0|Q4_K|Q5_K|Q6_K|Q4_K_M|Q5_K_M|F16|BF16 [--threads N]",
                       "write a checkpoint as a quantized GGUF (streamed tensor by tensor; llama.cpp's Q4_K_M/Q5_K_M "
                       "mixes; norms stay F32)",
                       run_quantize,
                       {{"model", "PATH", "a Hugging Face or Meta folder, or a .gguf file (blocks are re-quantized)"},
                        {"out", "FILE.gguf", "the file to write (appears only when complete)"},
                        {"type", "TYPE", "Q8_0, Q4_0, Q4_K, Q5_K, Q6_K (every matrix), llama.cpp's mixes Q4_K_M, "
                                         "Q5_K_M, or F16 / BF16 (every matrix rounded, not quantized)"},
                        {"threads", "N", "conversion threads (0 = all cores; default 0)"}}});

}  // namespace strata::cli
