// Which intermediate tensors a forward pass keeps.
#include "strata/trace.hpp"

#include <algorithm>
#include <initializer_list>
#include <utility>

namespace strata {

namespace {
bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

bool TraceRequest::wants(const std::string& name) const {
    if (names.count(name)) return true;
    // Attention probabilities are T x T per head: only when asked for, whatever `all` says.
    if (ends_with(name, ".attention.probs")) return attention_probs;
    if (name == "logits") return keep_logits || all;
    if (all) return true;
    if (residuals && (name == "x0" || name == "norm" || name.rfind("h.", 0) == 0)) return true;
    return false;
}

TraceRequest TraceRequest::everything() {
    TraceRequest r;
    r.residuals = true;
    r.all = true;
    r.attention_probs = true;
    r.logits_all_positions = true;
    r.keep_logits = true;
    return r;
}

std::vector<TracedShape> trace_shapes(const ModelConfig& c, int64_t T, int64_t pos0) {
    std::vector<TracedShape> out{{"x0", T, c.dim}};
    for (int64_t l = 0; l < c.n_layers; ++l) {
        const std::string p = "layers." + std::to_string(l) + ".";
        for (const auto& [what, cols] : std::initializer_list<std::pair<const char*, int64_t>>{
                 {"attention_norm", c.dim}, {"q", c.q_dim()}, {"k", c.kv_dim()}, {"v", c.kv_dim()}})
            out.push_back({p + what, T, cols});
        out.push_back({p + "attention.probs", c.n_heads * T, pos0 + T});
        for (const auto& [what, cols] : std::initializer_list<std::pair<const char*, int64_t>>{
                 {"attention.heads", c.q_dim()}, {"attention_out", c.dim}, {"h", c.dim}, {"ffn_norm", c.dim},
                 {"ffn_hidden", c.hidden_dim}, {"ffn_out", c.dim}})
            out.push_back({p + what, T, cols});
        out.push_back({"h." + std::to_string(l), T, c.dim});
    }
    out.push_back({"norm", T, c.dim});
    out.push_back({"logits", T, c.vocab_size});
    return out;
}

uint64_t trace_bytes(const ModelConfig& c, const TraceRequest& request, int64_t T, int64_t pos0) {
    const int64_t logits_rows = request.logits_all_positions ? T : 1;
    // In long double: a request far beyond any memory must not wrap around to a small number.
    long double floats = static_cast<long double>(c.vocab_size);  // last_logits
    for (const TracedShape& s : trace_shapes(c, T, pos0)) {
        if (!request.wants(s.name)) continue;
        const int64_t rows = s.name == "logits" ? logits_rows : s.rows;
        floats += static_cast<long double>(rows) * static_cast<long double>(s.cols);
    }
    const long double top = request.top_k > 0 ? static_cast<long double>(logits_rows) *
                                                    (sizeof(std::vector<TokenScore>) +
                                                     static_cast<long double>(std::min<int64_t>(request.top_k, c.vocab_size)) * sizeof(TokenScore))
                                              : 0.0L;
    const long double b = floats * 4.0L + top;
    return b >= 1.8e19L ? UINT64_MAX : static_cast<uint64_t>(b);
}

const TracedTensor* Trace::find(const std::string& name) const {
    auto it = tensors.find(name);
    return it == tensors.end() ? nullptr : &it->second;
}

}  // namespace strata
