// Which type each tensor gets when a model is quantized (the rules are listed in strata/quantize.hpp).
#include <algorithm>
#include <cctype>

#include "strata/error.hpp"
#include "strata/quantize.hpp"
#include "strata/writers.hpp"

namespace strata {

namespace {

struct SchemeRow {
    const char* name;
    DType base;
    bool mix;
    uint32_t file_type;  // llama_ftype
};
constexpr SchemeRow kSchemes[] = {
    {"Q8_0", DType::Q8_0, false, 7},     {"Q4_0", DType::Q4_0, false, 2},   {"Q4_K", DType::Q4_K, false, 14},
    {"Q5_K", DType::Q5_K, false, 16},    {"Q6_K", DType::Q6_K, false, 18},  {"Q4_K_M", DType::Q4_K, true, 15},
    {"Q5_K_M", DType::Q5_K, true, 17},   {"F16", DType::F16, false, 1},     {"BF16", DType::BF16, false, 32},
};

bool use_more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// The layer index of "layers.N.<suffix>", or -1.
int64_t layer_of(const std::string& name, const char* suffix) {
    if (name.rfind("layers.", 0) != 0) return -1;
    const size_t dot = name.find('.', 7);
    if (dot == std::string::npos || name.compare(dot + 1, std::string::npos, suffix) != 0) return -1;
    return std::stoll(name.substr(7, dot - 7));
}

}  // namespace

QuantScheme quant_scheme(std::string_view name) {
    std::string upper(name);
    std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char ch) { return std::toupper(ch); });
    for (const SchemeRow& r : kSchemes)
        if (upper == r.name) return QuantScheme{r.name, r.base, r.mix, r.file_type};
    std::string all;
    for (const SchemeRow& r : kSchemes) all += std::string(all.empty() ? "" : ", ") + r.name;
    throw InputError("unknown quantization type \"" + std::string(name) + "\" (one of " + all + ")");
}

std::vector<std::string> quant_scheme_names() {
    std::vector<std::string> v;
    for (const SchemeRow& r : kSchemes) v.emplace_back(r.name);
    return v;
}

std::vector<TensorPlan> quant_plan(const Model& model, const QuantScheme& scheme) {
    const ModelConfig& c = model.config;
    // Write order: the order write_gguf writes them in.
    const std::vector<std::string> order = gguf_weight_order(c);

    std::vector<TensorPlan> plan;
    for (const std::string& name : order) {
        const TensorView& t = model.tensor(name);
        TensorPlan p{name, t.dtype, scheme.base, "base type"};
        if (t.shape.size() < 2) {
            p.to = DType::F32;
            p.reason = "1-D: kept F32";
            plan.push_back(std::move(p));
            continue;
        }
        if (scheme.mix) {
            const bool is_output = name == "output" || (name == "tok_embeddings" && c.tie_embeddings);
            const int64_t wv = layer_of(name, "attention.wv"), w2 = layer_of(name, "feed_forward.w2");
            if (is_output) {
                p.to = DType::Q6_K;
                p.reason = c.tie_embeddings ? "mix: tied output" : "mix: output";
            } else if (wv >= 0 && use_more_bits(wv, c.n_layers)) {
                p.to = DType::Q6_K;
                p.reason = "mix: attention.wv use_more_bits";
            } else if (w2 >= 0 && use_more_bits(w2, c.n_layers)) {
                p.to = DType::Q6_K;
                p.reason = "mix: feed_forward.w2 use_more_bits";
            } else if (wv >= 0 && c.n_layers == 80 && p.to == DType::Q4_K) {
                p.to = DType::Q5_K;
                p.reason = "mix: attention.wv of a 70B model";
            }
        }
        const int64_t cols = t.cols();
        if (dtype_is_block(p.to) && cols % dtype_block_size(p.to) != 0) {
            const std::string why = "fallback: row " + std::to_string(cols) + " % " +
                                    std::to_string(dtype_block_size(p.to)) + " != 0";
            p.to = (dtype_block_size(p.to) == 256 && cols % 32 == 0) ? DType::Q8_0 : DType::F16;
            p.reason = why;
        }
        plan.push_back(std::move(p));
    }
    return plan;
}

void write_quantized_gguf(const Model& model, const std::filesystem::path& out, const QuantScheme& scheme,
                          const std::vector<TensorPlan>& plan, int threads,
                          std::function<void(const std::string&, DType, int64_t, int64_t)> on_tensor,
                          const std::atomic<bool>* cancel) {
    GgufWriteOptions o;
    for (const TensorPlan& p : plan) o.types[p.name] = p.to;
    o.file_type = scheme.file_type;
    o.threads = threads;
    o.on_tensor = std::move(on_tensor);
    o.cancel = cancel;
    write_gguf(model, out, o);
}

}  // namespace strata
