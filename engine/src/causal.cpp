// Causal tools over the forward pass: the activation-patching sweep and direct logit attribution. Both are
// ordinary passes of the Transformer with interventions and traces; nothing here computes a layer itself.
#include "strata/causal.hpp"

#include <cmath>

#include "strata/error.hpp"

namespace strata {

namespace {

void check_token(const ModelConfig& c, int32_t id, const char* what) {
    if (id < 0 || id >= c.vocab_size)
        throw InputError(std::string(what) + " token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                         std::to_string(c.vocab_size - 1) + ")");
}

double metric(const Trace& t, int32_t answer, int32_t foil) {
    return double(t.last_logits[static_cast<size_t>(answer)]) - double(t.last_logits[static_cast<size_t>(foil)]);
}

// A pass that keeps only the named sites (and the last position's logits, which every pass keeps).
TraceRequest keeping(std::set<std::string> names, const Interventions& interventions) {
    TraceRequest r;
    r.residuals = false;
    r.top_k = 0;
    r.names = std::move(names);
    r.interventions = interventions;
    return r;
}

}  // namespace

PatchSweep patch_sweep(Transformer& tf, std::span<const int32_t> clean, std::span<const int32_t> corrupt,
                       int32_t answer, int32_t foil, const PatchSweepOptions& o) {
    const ModelConfig& c = tf.model().config;
    if (clean.size() != corrupt.size())
        throw InputError("patch: the clean prompt has " + std::to_string(clean.size()) + " tokens and the corrupt " +
                         std::to_string(corrupt.size()) + "; they must have the same length");
    if (clean.empty()) throw InputError("patch: the prompts are empty");
    check_token(c, answer, "answer");
    check_token(c, foil, "foil");
    const auto T = static_cast<int64_t>(clean.size());

    std::set<std::string> sites;
    for (int64_t L = 0; L < c.n_layers; ++L) sites.insert(patch_site_name(o.site, L));

    PatchSweep sweep;
    sweep.site = o.site;
    KVCache cache(tf.backend(), c, T);
    const Trace clean_trace = tf.prefill(cache, clean, keeping(sites, o.base), o.cancel);
    sweep.clean = metric(clean_trace, answer, foil);
    cache.truncate(0);
    sweep.corrupt = metric(tf.prefill(cache, corrupt, keeping({}, o.base), o.cancel), answer, foil);
    sweep.effect.assign(static_cast<size_t>(c.n_layers), std::vector<double>(static_cast<size_t>(T), 0.0));

    // A patch at position p changes nothing before p, so the corrupt cache's rows [0, p) serve every patch at p.
    // Positions run from the last to the first: a patched run at p rewrites only rows >= p.
    const int64_t total = c.n_layers * T;
    int64_t done = 0;
    for (int64_t p = T - 1; p >= 0; --p) {
        for (int64_t L = 0; L < c.n_layers; ++L) {
            if (o.cancel && o.cancel->load()) throw Cancelled();
            TraceRequest r = keeping({}, o.base);
            r.interventions.push_back(patch_from(clean_trace, PatchSpec{patch_site_name(o.site, L), p}));
            cache.truncate(p);
            const Trace t = tf.prefill(cache, corrupt.subspan(static_cast<size_t>(p)), r, o.cancel);
            sweep.effect[static_cast<size_t>(L)][static_cast<size_t>(p)] = metric(t, answer, foil);
            ++done;
            if (o.progress && !o.progress(done, total)) throw Cancelled();
        }
    }
    return sweep;
}

Attribution attribute(Transformer& tf, std::span<const int32_t> tokens, int32_t target, int64_t position,
                      const Interventions& interventions) {
    const Model& model = tf.model();
    const ModelConfig& c = model.config;
    const auto T = static_cast<int64_t>(tokens.size());
    if (T == 0) throw InputError("attribute: the prompt is empty");
    check_token(c, target, "target");
    if (position < 0) position = T - 1;
    if (position >= T)
        throw InputError("attribute: position " + std::to_string(position) + " is not in the prompt (0.." +
                         std::to_string(T - 1) + ")");

    // Positions after P do not change anything at P (causal attention): run the prompt up to P, so that P is the
    // last row and its logits are the ones every pass keeps.
    const std::string last_h = "h." + std::to_string(c.n_layers - 1);
    std::set<std::string> names{"x0", last_h};
    for (int64_t L = 0; L < c.n_layers; ++L) {
        names.insert("layers." + std::to_string(L) + ".attention.heads");
        names.insert("layers." + std::to_string(L) + ".ffn_out");
    }
    KVCache cache(tf.backend(), c, position + 1);
    const Trace trace = tf.prefill(cache, tokens.first(static_cast<size_t>(position + 1)), keeping(names, interventions));
    auto row = [&](const std::string& name) {  // the traced row at P
        const TracedTensor& t = *trace.find(name);
        return t.data.data() + position * t.cols;
    };

    Attribution a;
    a.target = target;
    a.position = position;
    a.logit = trace.last_logits[static_cast<size_t>(target)];

    // u = scale * norm.weight * output[target]: the logit is u . h for the final residual h, held at this scale.
    const int64_t dim = c.dim;
    const float* h = row(last_h);
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += double(h[i]) * h[i];
    a.scale = 1.0 / std::sqrt(ss / double(dim) + double(c.norm_eps));
    const std::vector<float> gain = model.tensor("norm").to_f32();  // [dim]
    std::vector<float> out_row(static_cast<size_t>(dim));           // [dim]
    model.output_weight().row_to_f32(target, out_row.data());
    std::vector<double> u(static_cast<size_t>(dim));
    for (int64_t i = 0; i < dim; ++i) u[size_t(i)] = a.scale * double(gain[size_t(i)]) * double(out_row[size_t(i)]);
    auto project = [&](const float* v) {
        double s = 0;
        for (int64_t i = 0; i < dim; ++i) s += u[size_t(i)] * double(v[i]);
        return s;
    };

    a.components.push_back({"x0", project(row("x0"))});
    const int64_t hd = c.head_dim, q_dim = c.q_dim();
    std::vector<float> wo_row(static_cast<size_t>(q_dim));  // [n_heads * head_dim]
    std::vector<double> g(static_cast<size_t>(q_dim));      // wo^T u: [n_heads * head_dim]
    for (int64_t L = 0; L < c.n_layers; ++L) {
        const std::string layer = "layers." + std::to_string(L);
        // Head H adds wo[:, H*hd:(H+1)*hd] @ z_H to the residual, so its part of the logit is (wo^T u)_H . z_H.
        const TensorView& wo = model.tensor(layer + ".attention.wo");  // [dim, n_heads * head_dim]
        std::fill(g.begin(), g.end(), 0.0);
        for (int64_t i = 0; i < dim; ++i) {
            wo.row_to_f32(i, wo_row.data());
            for (int64_t j = 0; j < q_dim; ++j) g[size_t(j)] += u[size_t(i)] * double(wo_row[size_t(j)]);
        }
        const float* z = row(layer + ".attention.heads");
        for (int64_t H = 0; H < c.n_heads; ++H) {
            double s = 0;
            for (int64_t j = H * hd; j < (H + 1) * hd; ++j) s += g[size_t(j)] * double(z[j]);
            a.components.push_back({layer + ".attention.heads." + std::to_string(H), s});
        }
        a.components.push_back({layer + ".feed_forward", project(row(layer + ".ffn_out"))});
    }
    return a;
}

}  // namespace strata
