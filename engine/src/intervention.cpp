// Interventions: parsing the specs a person writes into changes at traced sites, and the values that patching
// and mean ablation put there. Where the changes are made is Transformer's Captures (transformer.cpp).
#include "strata/intervention.hpp"

#include <charconv>

#include "strata/error.hpp"
#include "strata/trace.hpp"

namespace strata {

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> parts;
    size_t pos = 0;
    while (true) {
        const size_t next = s.find(sep, pos);
        parts.push_back(s.substr(pos, next == std::string::npos ? std::string::npos : next - pos));
        if (next == std::string::npos) return parts;
        pos = next + 1;
    }
}

std::string trim(std::string s) {
    while (!s.empty() && s.front() == ' ') s.erase(s.begin());
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s;
}

// A non-negative decimal index, or -1 when `s` is not one.
int64_t index_of(const std::string& s) {
    if (s.empty() || s.size() > 12) return -1;
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size() || v < 0) return -1;
    return v;
}

// "layers.L.<rest>" -> L (checked against n_layers) and the parts after it; -1 when the form does not match.
int64_t layer_of(const std::vector<std::string>& parts, const ModelConfig& c, const std::string& what) {
    if (parts.size() < 2 || parts[0] != "layers") return -1;
    const int64_t L = index_of(parts[1]);
    if (L < 0) return -1;
    if (L >= c.n_layers)
        throw InputError(what + ": the model has layers 0.." + std::to_string(c.n_layers - 1) + ", not " +
                         std::to_string(L));
    return L;
}

std::string layer_name(int64_t L, const char* what) { return "layers." + std::to_string(L) + "." + what; }

}  // namespace

int64_t site_width(const ModelConfig& c, const std::string& site) {
    const auto parts = split(site, '.');
    auto bad = [&] { return InputError("'" + site + "' is not a site an intervention can act on"); };
    if (parts.size() == 2 && parts[0] == "h") {
        const int64_t L = index_of(parts[1]);
        if (L < 0) throw bad();
        if (L >= c.n_layers)
            throw InputError("'" + site + "': the model has layers 0.." + std::to_string(c.n_layers - 1));
        return c.dim;
    }
    const int64_t L = layer_of(parts, c, "'" + site + "'");
    if (L < 0) throw bad();
    const std::string rest = site.substr(site.find('.', 7) + 1);
    if (rest == "attention.heads") return c.q_dim();
    if (rest == "attention_out" || rest == "ffn_out") return c.dim;
    if (rest == "ffn_hidden") return c.hidden_dim;
    throw bad();
}

void validate(const Intervention& iv, const ModelConfig& c) {
    const int64_t width = site_width(c, iv.site);
    const std::string what = iv.label.empty() ? iv.site : iv.label;
    const int64_t cols = iv.cols < 0 ? width : iv.cols;
    if (iv.col0 < 0 || iv.cols == 0 || iv.col0 + cols > width)
        throw InputError(what + ": columns " + std::to_string(iv.col0) + ".." + std::to_string(iv.col0 + cols - 1) +
                         " do not fit " + iv.site + " (width " + std::to_string(width) + ")");
    if (!iv.values.empty() && static_cast<int64_t>(iv.values.size()) != cols)
        throw InputError(what + ": " + std::to_string(iv.values.size()) + " values for " + std::to_string(cols) +
                         " columns");
    if (iv.position < -1) throw InputError(what + ": position " + std::to_string(iv.position) + " is negative");
}

Interventions parse_ablation(const std::string& raw, const ModelConfig& c) {
    const std::string spec = trim(raw);
    const std::string what = "ablation '" + spec + "'";
    const auto parts = split(spec, '.');
    const int64_t L = layer_of(parts, c, what);
    auto zero = [&](const char* site, int64_t col0 = 0, int64_t cols = -1) {
        return Intervention{layer_name(L, site), col0, cols, -1, {}, spec};
    };
    if (L >= 0) {
        if (parts.size() == 2) return {zero("attention_out"), zero("ffn_out")};  // the block's output is its input
        if (parts.size() == 3 && parts[2] == "attention") return {zero("attention_out")};
        if (parts.size() == 3 && parts[2] == "feed_forward") return {zero("ffn_out")};
        if (parts.size() == 5 && parts[2] == "attention" && parts[3] == "heads") {
            const int64_t H = index_of(parts[4]);
            if (H < 0) throw InputError(what + ": '" + parts[4] + "' is not a head index");
            if (H >= c.n_heads)
                throw InputError(what + ": the model has query heads 0.." + std::to_string(c.n_heads - 1));
            return {zero("attention.heads", H * c.head_dim, c.head_dim)};
        }
        if (parts.size() == 5 && parts[2] == "feed_forward" && parts[3] == "neurons") {
            const int64_t N = index_of(parts[4]);
            if (N < 0) throw InputError(what + ": '" + parts[4] + "' is not a neuron index");
            if (N >= c.hidden_dim)
                throw InputError(what + ": the model has hidden units 0.." + std::to_string(c.hidden_dim - 1));
            return {zero("ffn_hidden", N, 1)};
        }
    }
    throw InputError(what + " is not one of layers.L, layers.L.attention, layers.L.attention.heads.H, "
                            "layers.L.feed_forward, layers.L.feed_forward.neurons.N");
}

Interventions parse_ablations(const std::string& specs, const ModelConfig& c) {
    Interventions all;
    for (const std::string& s : split(specs, ',')) {
        if (trim(s).empty()) throw InputError("empty ablation spec in '" + specs + "'");
        for (Intervention& iv : parse_ablation(s, c)) all.push_back(std::move(iv));
    }
    return all;
}

std::string patch_site_name(PatchSite site, int64_t layer) {
    switch (site) {
        case PatchSite::Residual: return "h." + std::to_string(layer);
        case PatchSite::AttentionOut: return layer_name(layer, "attention_out");
        case PatchSite::FfnOut: return layer_name(layer, "ffn_out");
    }
    return {};
}

PatchSite parse_patch_site_kind(const std::string& kind) {
    if (kind == "h") return PatchSite::Residual;
    if (kind == "attention_out") return PatchSite::AttentionOut;
    if (kind == "ffn_out") return PatchSite::FfnOut;
    throw InputError("patch site '" + kind + "' is not one of h, attention_out, ffn_out");
}

PatchSpec parse_patch(const std::string& raw, const ModelConfig& c) {
    const std::string spec = trim(raw);
    const size_t at = spec.rfind('@');
    const std::string what = "patch '" + spec + "'";
    if (at == std::string::npos) throw InputError(what + " is not SITE@POS (e.g. h.2@5)");
    const std::string site = spec.substr(0, at);
    const int64_t pos = index_of(spec.substr(at + 1));
    if (pos < 0) throw InputError(what + ": '" + spec.substr(at + 1) + "' is not a position");
    const auto parts = split(site, '.');
    const bool residual = parts.size() == 2 && parts[0] == "h";
    const bool branch = parts.size() == 3 && parts[0] == "layers" && (parts[2] == "attention_out" || parts[2] == "ffn_out");
    if (!residual && !branch)
        throw InputError(what + ": the site must be h.L, layers.L.attention_out or layers.L.ffn_out");
    site_width(c, site);  // the layer exists
    return {site, pos};
}

std::vector<PatchSpec> parse_patches(const std::string& specs, const ModelConfig& c) {
    std::vector<PatchSpec> all;
    for (const std::string& s : split(specs, ',')) {
        if (trim(s).empty()) throw InputError("empty patch spec in '" + specs + "'");
        all.push_back(parse_patch(s, c));
    }
    return all;
}

Intervention patch_from(const Trace& donor, const PatchSpec& spec) {
    const std::string label = spec.site + "@" + std::to_string(spec.position);
    const TracedTensor* t = donor.find(spec.site);
    if (!t) throw InputError("patch " + label + ": the donor run did not keep " + spec.site);
    const int64_t row = spec.position - donor.pos0;
    if (row < 0 || row >= t->rows)
        throw InputError("patch " + label + ": position " + std::to_string(spec.position) +
                         " is not in the donor prompt (positions " + std::to_string(donor.pos0) + ".." +
                         std::to_string(donor.pos0 + t->rows - 1) + ")");
    const float* p = t->data.data() + row * t->cols;
    return Intervention{spec.site, 0, -1, spec.position, std::vector<float>(p, p + t->cols), label};
}

Intervention mean_ablation(const Intervention& zero, const Trace& clean) {
    const TracedTensor* t = clean.find(zero.site);
    if (!t || t->rows == 0)
        throw InputError("mean ablation of " + (zero.label.empty() ? zero.site : zero.label) + ": the run did not keep " +
                         zero.site);
    const int64_t cols = zero.cols < 0 ? t->cols - zero.col0 : zero.cols;
    if (zero.col0 < 0 || zero.col0 + cols > t->cols) throw InputError("mean ablation: columns outside " + zero.site);
    std::vector<double> sum(static_cast<size_t>(cols), 0.0);
    for (int64_t r = 0; r < t->rows; ++r)
        for (int64_t j = 0; j < cols; ++j) sum[static_cast<size_t>(j)] += t->data[static_cast<size_t>(r * t->cols + zero.col0 + j)];
    Intervention mean = zero;
    mean.cols = cols;
    mean.values.resize(static_cast<size_t>(cols));
    for (int64_t j = 0; j < cols; ++j) mean.values[static_cast<size_t>(j)] = static_cast<float>(sum[static_cast<size_t>(j)] / double(t->rows));
    mean.label = (zero.label.empty() ? zero.site : zero.label) + " (mean)";
    return mean;
}

}  // namespace strata
