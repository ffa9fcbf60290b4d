#pragma once
// Shared by the commands that run a model: load it and make a backend from --model / --backend / --device /
// --threads, read a prompt from --tokens / --text, and describe what ran as JSON.
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "strata/backend.hpp"
#include "strata/model.hpp"
#include "strata/transformer.hpp"

namespace strata::cli {

// The options every model-running command accepts (add them to allow_only).
inline std::vector<std::string> model_option_keys() {
    return {"model", "backend", "device", "threads", "exact", "cpu-isa"};
}

struct LoadedModel {
    std::unique_ptr<Model> model;
    std::unique_ptr<Backend> backend;
};

// Loads --model, checks its weights are finite, and binds it to --backend (cpu | vulkan, default cpu) on
// --device N (Vulkan) with --threads N (CPU, 0 = all). With integer_dot (generate, bench: the commands people time
// against llama.cpp) block-type weights run on the CPU's integer-dot path unless --exact is given; the analysis
// commands (forward, patch, attribute) stay exact, the library's default, as the explorer and the tests do.
inline LoadedModel load_model_and_backend(const Args& args, bool integer_dot = false) {
    LoadedModel m;
    m.model = load_model(args.require("model"));
    check_weights_finite(*m.model);
    BackendOptions o;
    o.name = args.get_or("backend", "cpu");
    if (o.name != "cpu" && o.name != "vulkan") throw UsageError("--backend expects cpu or vulkan, got '" + o.name + "'");
    o.device_index = static_cast<int>(args.get_int("device", -1));
    o.threads = static_cast<int>(args.get_int("threads", 0));
    o.exact = !integer_dot || args.has("exact");
    o.cpu_isa = args.get_or("cpu-isa", "");
    m.backend = make_backend(o);
    m.backend->load(*m.model);
    return m;
}

// --kv-cache f32|f16 (default f32): how generate and bench keep the keys and values.
inline KvCacheType kv_cache_option(const Args& args) {
    const std::string v = args.get_or("kv-cache", "f32");
    if (v == "f32") return KvCacheType::F32;
    if (v == "f16") return KvCacheType::F16;
    throw UsageError("--kv-cache expects f32 or f16, got '" + v + "'");
}
inline const char* kv_cache_help() {
    return "the KV cache's values: f32 (default) or f16 (binary16: half the memory and half the bytes attention "
           "reads; each key and value rounded once)";
}

// --tokens 128000,9906,... as given, or --text TEXT encoded as plain text after <|begin_of_text|>.
inline std::vector<int32_t> prompt_ids(const Args& args, const Model& model) {
    const bool tokens = args.has("tokens"), text = args.has("text");
    if (tokens == text) throw UsageError("give exactly one of --tokens and --text");
    if (tokens) return args.get_ids("tokens");
    std::vector<int32_t> ids{model.config.bos_id};
    const auto body = model.tokenizer.encode(args.get_or("text", ""));
    ids.insert(ids.end(), body.begin(), body.end());
    return ids;
}

inline nlohmann::json model_json(const Model& model, const Backend& backend) {
    const BackendInfo b = backend.info();
    return {{"name", model.config.name},
            {"path", model.path.string()},
            {"format", format_name(model.format)},
            {"demo", model.config.is_demo},
            {"instruct", model.config.is_instruct},
            {"parameters", model.parameter_count()},
            {"backend", {{"name", b.backend}, {"device", b.device}, {"device_type", b.device_type}, {"driver", b.driver},
              {"kernels", b.kernels}}}};
}

// JSON text; bytes that are not UTF-8 (a token holding half a character) become U+FFFD instead of an error.
inline std::string json_text(const nlohmann::json& j, int indent = -1) {
    return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace strata::cli
