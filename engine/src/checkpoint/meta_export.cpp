// write_meta: a loaded model as Meta's original folder (params.json, consolidated.00.pth, tokenizer.model), laid
// out as meta-llama's download gives it, so model.py's loader (torch.load + ModelArgs(**params)) reads it.
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "pickle.hpp"
#include "torch_zip.hpp"
#include "strata/error.hpp"
#include "strata/writers.hpp"

namespace fs = std::filesystem;

namespace strata {

namespace {

// A float as the shortest decimal that reads back to it (1e-05, not 9.999999747378752e-06).
double json_float(float x) {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, x);
    return std::strtod(std::string(buf, r.ptr).c_str(), nullptr);
}

// multiple_of and ffn_dim_multiplier that make Meta's rule give `hidden`. Meta's own releases use these pairs
// (8B: 1024 and 1.3; 3.2 1B: 256 and 1.5; 3.2 3B: 256 and 1.0), so they are tried first.
std::pair<int64_t, double> ffn_params(int64_t dim, int64_t hidden) {
    for (double mult : {0.0, 1.3, 1.5, 1.0, 2.0, 1.2})
        for (int64_t m : {1024, 512, 256, 128, 64, 32, 16, 8, 4, 2, 1})
            if (meta_hidden_dim(dim, m, mult) == hidden) return {m, mult};
    // Any other size: round nothing (multiple_of 1) and scale int(8*dim/3) to just above `hidden`.
    const auto base = static_cast<double>(static_cast<int64_t>(2.0 * static_cast<double>(4 * dim) / 3.0));
    const double mult = (static_cast<double>(hidden) + 0.5) / base;
    if (meta_hidden_dim(dim, 1, mult) == hidden) return {1, mult};
    throw UnsupportedError("write_meta: no multiple_of / ffn_dim_multiplier gives hidden_dim " +
                           std::to_string(hidden) + " for dim " + std::to_string(dim));
}

// Llama 3.1 scaling as params.json can say it. A GGUF model carries only the factors; they are accepted when they
// are exactly what apply_scaling gives for one of the factors Meta has released.
RopeScaling scaling_of(const Model& model) {
    const ModelConfig& c = model.config;
    if (c.rope_scaling.enabled || model.rope_freqs_factors.empty()) return c.rope_scaling;
    for (float factor : {8.0f, 32.0f, 16.0f}) {
        ModelConfig probe = c;
        probe.rope_scaling = RopeScaling{true, factor, 1.0f, 4.0f, 8192};
        const std::vector<float> f = llama31_rope_factors(probe);
        bool same = f.size() == model.rope_freqs_factors.size();
        for (size_t i = 0; same && i < f.size(); ++i)
            same = std::fabs(f[i] - model.rope_freqs_factors[i]) <= 1e-6f * f[i];
        if (same) return probe.rope_scaling;
    }
    throw UnsupportedError("write_meta: " + c.name + " has RoPE frequency factors (GGUF rope_freqs) that are not "
                           "Llama 3.1's apply_scaling, and params.json cannot describe them");
}

std::string base64(const std::string& in) {
    static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    out.reserve((in.size() + 2) / 3 * 4);
    size_t i = 0;
    for (; i + 2 < in.size(); i += 3) {
        const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
        out += {k[v >> 18], k[(v >> 12) & 63], k[(v >> 6) & 63], k[v & 63]};
    }
    if (i + 1 == in.size()) {
        const uint32_t v = uint8_t(in[i]) << 16;
        out += {k[v >> 18], k[(v >> 12) & 63], '=', '='};
    } else if (i + 2 == in.size()) {
        const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8);
        out += {k[v >> 18], k[(v >> 12) & 63], k[(v >> 6) & 63], '='};
    }
    return out;
}

void write_text(const fs::path& p, const std::string& s) {
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    if (!f) throw Error(p.string() + ": cannot open for writing");
    f.write(s.data(), static_cast<std::streamsize>(s.size()));
    f.flush();
    if (!f) throw Error(p.string() + ": write failed");
}

// tiktoken's rank file: one "base64(bytes) rank" line per ordinary token. Meta's Tokenizer appends the special
// tokens after the last rank, so they must come after every ordinary token here too.
std::string tiktoken_ranks(const Tokenizer& tok) {
    std::string out;
    bool in_specials = false;
    for (int32_t id = 0; id < tok.vocab_size(); ++id) {
        if (tok.is_special(id)) {
            in_specials = true;
            continue;
        }
        if (in_specials)
            throw UnsupportedError("write_meta: ordinary token " + std::to_string(id) +
                                   " follows the special tokens; tokenizer.model cannot place it");
        out += base64(tok.token_bytes(id));
        out += ' ';
        out += std::to_string(id);
        out += '\n';
    }
    return out;
}

// Canonical rows of a tensor, fed to the zip writer's sink.
void feed_rows(const torch_zip::Writer::Sink& sink, const TensorView& t) {
    if (t.rope_heads <= 0 || t.shape.size() < 2) {
        sink(t.data, t.nbytes);
        return;
    }
    for (int64_t r = 0; r < t.rows(); ++r) sink(t.row_ptr(r), t.row_bytes());
}

}  // namespace

void write_meta(const Model& model, const fs::path& out_dir) {
    const ModelConfig& c = model.config;
    if (c.head_dim * c.n_heads != c.dim)
        throw UnsupportedError("write_meta: head_dim " + std::to_string(c.head_dim) + " is not dim / n_heads; "
                               "params.json cannot express it");
    if (model.tokenizer.empty()) throw TokenizerError("write_meta: the model has no tokenizer for tokenizer.model");
    std::error_code ec;
    fs::create_directories(out_dir, ec);
    if (!fs::is_directory(out_dir)) throw Error(out_dir.string() + ": cannot create the folder");

    const auto [multiple_of, ffn_mult] = ffn_params(c.dim, c.hidden_dim);
    const RopeScaling scaling = scaling_of(model);
    nlohmann::ordered_json p;
    p["dim"] = c.dim;
    p["n_layers"] = c.n_layers;
    p["n_heads"] = c.n_heads;
    p["n_kv_heads"] = c.n_kv_heads;
    p["vocab_size"] = c.vocab_size;
    p["multiple_of"] = multiple_of;
    if (ffn_mult > 0.0) p["ffn_dim_multiplier"] = ffn_mult;
    p["norm_eps"] = json_float(c.norm_eps);
    p["rope_theta"] = json_float(c.rope_theta);
    p["use_scaled_rope"] = scaling.enabled;
    // llama-models' names for apply_scaling's parameters; written only where they differ from its constants.
    if (scaling.enabled) {
        if (scaling.factor != 8.0f) p["rope_scaling_factor"] = json_float(scaling.factor);
        if (scaling.low_freq_factor != 1.0f) p["low_freq_factor"] = json_float(scaling.low_freq_factor);
        if (scaling.high_freq_factor != 4.0f) p["high_freq_factor"] = json_float(scaling.high_freq_factor);
        if (scaling.original_max_position_embeddings != 8192)
            p["original_max_position_embeddings"] = scaling.original_max_position_embeddings;
    }
    if (c.max_seq_len != (scaling.enabled ? 131072 : 8192)) p["max_seq_len"] = c.max_seq_len;
    write_text(out_dir / "params.json", p.dump(2) + "\n");
    write_text(out_dir / "tokenizer.model", tiktoken_ranks(model.tokenizer));

    // model.state_dict()'s order: embeddings, each block (attention, feed_forward, norms), norm, output.
    std::vector<std::string> order{"tok_embeddings"};
    for (int64_t i = 0; i < c.n_layers; ++i)
        for (const char* s : {"attention.wq", "attention.wk", "attention.wv", "attention.wo", "feed_forward.w1",
                              "feed_forward.w2", "feed_forward.w3", "attention_norm", "ffn_norm"})
            order.push_back(names::layer(i, s));
    order.push_back("norm");
    if (!c.tie_embeddings) order.push_back("output");

    std::vector<pickle::WriteTensor> records;
    for (size_t k = 0; k < order.size(); ++k) {
        const TensorView& t = model.tensor(order[k]);
        records.push_back({order[k] + ".weight", t.dtype, std::to_string(k), t.shape});
    }
    const std::string prefix = "consolidated/";
    torch_zip::Writer zip(out_dir / "consolidated.00.pth");
    zip.add(prefix + "data.pkl", pickle::write_state_dict(records));
    zip.add(prefix + "byteorder", "little");
    for (size_t k = 0; k < order.size(); ++k) {
        const TensorView& t = model.tensor(order[k]);
        zip.add(prefix + "data/" + std::to_string(k), t.nbytes,
                [&t](const torch_zip::Writer::Sink& sink) { feed_rows(sink, t); });
    }
    zip.add(prefix + "version", "3\n");
    zip.finish();
}

}  // namespace strata
