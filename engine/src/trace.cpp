// Which intermediate tensors a forward pass keeps.
#include "strata/trace.hpp"

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

const TracedTensor* Trace::find(const std::string& name) const {
    auto it = tensors.find(name);
    return it == tensors.end() ? nullptr : &it->second;
}

}  // namespace strata
