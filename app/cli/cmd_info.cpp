// strata-cli info: what a checkpoint is (format, config, exact parameter counts, dtypes, bytes), as JSON.
#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "strata/model.hpp"

namespace strata::cli {
namespace {

int run_info(const Args& args) {
    args.allow_only({"model"});
    const std::string path = args.require("model");
    const auto model = load_model(path);

    std::map<std::string, int64_t> dtypes;
    for (const auto& [name, t] : model->tensors) ++dtypes[std::string(dtype_name(t.dtype))];
    nlohmann::json files = nlohmann::json::array();
    for (const MappedFile& f : model->files) files.push_back({{"path", f.path().string()}, {"bytes", f.size()}});

    const nlohmann::json out = {
        {"format", format_name(model->format)},
        {"path", model->path.string()},
        {"name", model->config.name},
        {"demo", model->config.is_demo},
        {"config", model->config},
        {"parameters", {{"total", model->parameter_count()}, {"groups", model->parameter_groups()}}},
        {"dtypes", dtypes},
        {"tensors", model->tensors.size()},
        {"file_bytes", model->file_bytes()},
        {"files", files},
        {"tokenizer", {{"vocab_size", model->tokenizer.vocab_size()}}},
    };
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
}

}  // namespace

STRATA_COMMAND(Command{"info", "--model PATH",
                       "describe a checkpoint: format, config, parameter counts, dtypes, file bytes (JSON)", run_info,
                       {{"model", "PATH", "a Hugging Face or Meta folder, or a .gguf file"}}});

}  // namespace strata::cli
