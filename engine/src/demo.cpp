// The demonstration model: a small Llama 3 in Hugging Face layout, so every part of Strata can be tried before a
// real checkpoint is downloaded. By default the tiny model scripts/train-demo trained, expanded from the compact
// weights embedded in the engine (demo_blob.cpp); with DemoOptions::random, random weights. Deterministic: the
// same bytes on every platform (the expansion is exact float arithmetic; for random weights mt19937_64 is
// specified exactly and the normal deviates are our own Box-Muller, not the library's).
#include "strata/demo.hpp"

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.hpp"
#include "demo_blob.hpp"
#include "strata/dtype.hpp"
#include "strata/error.hpp"
#include "strata/model.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace strata {

namespace {

constexpr int64_t kVocab = 128256;  // the Llama 3 tokenizer: 128000 BPE tokens + 256 special tokens

class Normal {
public:
    explicit Normal(uint64_t seed) : rng_(seed) {}
    double operator()() {
        if (have_spare_) {
            have_spare_ = false;
            return spare_;
        }
        // Uniforms in (0, 1] from the top 53 bits, so log() never sees 0.
        const double u1 = (static_cast<double>(rng_() >> 11) + 1.0) * 0x1.0p-53;
        const double u2 = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
        const double r = std::sqrt(-2.0 * std::log(u1));
        spare_ = r * std::sin(2.0 * M_PI * u2);
        have_spare_ = true;
        return r * std::cos(2.0 * M_PI * u2);
    }

private:
    std::mt19937_64 rng_;
    double spare_ = 0.0;
    bool have_spare_ = false;
};

// A weight in bf16 bytes, as it will be stored.
struct Weight {
    std::string hf_name;
    std::vector<int64_t> shape;
    std::vector<uint16_t> bf16;
};

std::vector<float> normal(Normal& n, int64_t count, double mean, double std) {
    std::vector<float> v(static_cast<size_t>(count));
    for (float& x : v) x = static_cast<float>(mean + std * n());
    return v;
}

Weight to_weight(std::string hf_name, std::vector<int64_t> shape, const std::vector<float>& values) {
    Weight w{std::move(hf_name), std::move(shape), {}};
    w.bf16.resize(values.size());
    for (size_t i = 0; i < values.size(); ++i) w.bf16[i] = f32_to_bf16(values[i]);
    return w;
}

// Hugging Face's convert_llama_weights_to_hf.py permute(): per head, Meta row 2i+p (RoPE pair i, half p) goes to
// row p*(head_dim/2)+i, so that rotate-half applies. w is [n_heads * head_dim, cols] in Meta's layout.
std::vector<float> permute_for_hf(const std::vector<float>& w, int64_t n_heads, int64_t head_dim, int64_t cols) {
    std::vector<float> out(w.size());
    for (int64_t h = 0; h < n_heads; ++h)
        for (int64_t i = 0; i < head_dim / 2; ++i)
            for (int64_t p = 0; p < 2; ++p) {
                const int64_t meta_row = h * head_dim + 2 * i + p;
                const int64_t hf_row = h * head_dim + p * (head_dim / 2) + i;
                std::copy_n(w.begin() + meta_row * cols, cols, out.begin() + hf_row * cols);
            }
    return out;
}

void write_text(const fs::path& file, const std::string& text) {
    std::ofstream f(file, std::ios::binary | std::ios::trunc);
    f << text;
    f.flush();
    if (!f) throw Error(file.string() + ": cannot write");
}

void check_options(const DemoOptions& o) {
    auto bad = [](const std::string& why) { throw InputError("demo model options: " + why); };
    if (o.dim <= 0 || o.n_layers <= 0 || o.n_heads <= 0 || o.n_kv_heads <= 0 || o.hidden_dim <= 0)
        bad("every size must be positive");
    if (o.dim > 8192 || o.n_layers > 64 || o.hidden_dim > 32768) bad("too large for a demonstration");
    if (o.dim % o.n_heads != 0) bad("dim must be a multiple of n_heads");
    if (o.n_heads % o.n_kv_heads != 0) bad("n_heads must be a multiple of n_kv_heads");
    if ((o.dim / o.n_heads) % 2 != 0) bad("head_dim (dim / n_heads) must be even for RoPE");
}


// The compact form scripts/train-demo writes: "STRDEMO1", a u32 header length, a JSON header (sizes, description,
// the tensor list), then the used token ids (int32 x n_used) and each tensor in order: "f32" as floats,
// "i8_row" as one float32 scale per row then the rows as int8 (value = q * scale). All little-endian.
class BlobReader {
public:
    explicit BlobReader(std::span<const std::byte> b) : b_(b) {}
    template <class T>
    std::vector<T> take(size_t count, const std::string& what) {
        if (count > (b_.size() - pos_) / sizeof(T)) fail(what + " runs past the end");
        std::vector<T> v(count);
        std::memcpy(v.data(), b_.data() + pos_, count * sizeof(T));
        pos_ += count * sizeof(T);
        return v;
    }
    bool at_end() const { return pos_ == b_.size(); }
    [[noreturn]] static void fail(const std::string& why) {
        throw FormatError("the embedded demonstration model (resources/demo/demo-model.bin): " + why);
    }

private:
    std::span<const std::byte> b_;
    size_t pos_ = 0;
};

struct TrainedDemo {
    json header;
    std::vector<Weight> weights;  // in HF names, in the order the random model writes them
};

// Meta-style names in the blob -> Hugging Face names in model.safetensors. train-demo keeps q/k rows in Hugging
// Face's rotate-half order already, so they are written as they are (no permute_for_hf).
std::string hf_name_of(const std::string& n) {
    if (n == "tok_embeddings") return "model.embed_tokens.weight";
    if (n == "norm") return "model.norm.weight";
    const size_t dot = n.find('.', 7);  // "layers.L.x"
    if (n.rfind("layers.", 0) != 0 || dot == std::string::npos) BlobReader::fail("unknown tensor " + n);
    const std::string p = "model.layers." + n.substr(7, dot - 7) + ".", w = n.substr(dot + 1);
    static const std::vector<std::pair<std::string, std::string>> map = {
        {"attention_norm", "input_layernorm.weight"}, {"ffn_norm", "post_attention_layernorm.weight"},
        {"wq", "self_attn.q_proj.weight"}, {"wk", "self_attn.k_proj.weight"}, {"wv", "self_attn.v_proj.weight"},
        {"wo", "self_attn.o_proj.weight"}, {"w1", "mlp.gate_proj.weight"}, {"w2", "mlp.down_proj.weight"},
        {"w3", "mlp.up_proj.weight"}};
    for (const auto& [meta, hf] : map)
        if (w == meta) return p + hf;
    BlobReader::fail("unknown tensor " + n);
}

TrainedDemo expand_trained() {
    BlobReader r(detail::demo_blob());
    const auto magic = r.take<char>(8, "the magic");
    if (std::string(magic.begin(), magic.end()) != "STRDEMO1") BlobReader::fail("not a strata-demo-1 blob");
    const auto hlen = r.take<uint32_t>(1, "the header length")[0];
    const auto htext = r.take<char>(hlen, "the header");
    TrainedDemo d;
    try {
        d.header = json::parse(htext.begin(), htext.end());
    } catch (const json::exception& e) {
        BlobReader::fail(std::string("header: ") + e.what());
    }
    const json& h = d.header;
    if (h.value("vocab_size", int64_t{0}) != kVocab) BlobReader::fail("vocab_size is not 128256");
    const int64_t dim = h.at("dim").get<int64_t>(), n_used = h.at("n_used").get<int64_t>();
    if (dim <= 0 || n_used <= 0 || n_used >= kVocab) BlobReader::fail("bad dim or n_used");
    const auto used = r.take<int32_t>(static_cast<size_t>(n_used), "the used ids");
    for (size_t i = 0; i < used.size(); ++i)
        if (used[i] < 0 || used[i] >= kVocab || (i > 0 && used[i] <= used[i - 1]))
            BlobReader::fail("the used ids must be increasing token ids");

    for (const json& t : h.at("tensors")) {
        const std::string name = t.at("name"), type = t.at("type");
        const std::vector<int64_t> shape = t.at("shape");
        std::vector<float> v;  // the tensor as trained, float32 (row-major)
        if (type == "f32" && shape.size() == 1) {
            v = r.take<float>(static_cast<size_t>(shape[0]), name);
        } else if (type == "i8_row" && shape.size() == 2) {
            const auto rows = static_cast<size_t>(shape[0]), cols = static_cast<size_t>(shape[1]);
            const auto scale = r.take<float>(rows, name + " scales");
            const auto q = r.take<int8_t>(rows * cols, name);
            v.resize(rows * cols);
            for (size_t i = 0; i < rows; ++i)
                for (size_t j = 0; j < cols; ++j) v[i * cols + j] = static_cast<float>(q[i * cols + j]) * scale[i];
        } else {
            BlobReader::fail(name + ": unknown type " + type);
        }
        if (name == "tok_embeddings") {
            // [n_used + 1, dim]: the used rows, then e_unused, which every other row of the table gets.
            if (shape[0] != n_used + 1 || shape[1] != dim) BlobReader::fail("tok_embeddings must be [n_used + 1, dim]");
            std::vector<float> table(static_cast<size_t>(kVocab * dim));
            const float* unused = v.data() + n_used * dim;
            for (int64_t row = 0; row < kVocab; ++row) std::copy_n(unused, dim, table.begin() + row * dim);
            for (int64_t i = 0; i < n_used; ++i) std::copy_n(v.begin() + i * dim, dim, table.begin() + used[i] * dim);
            d.weights.push_back(to_weight(hf_name_of(name), {kVocab, dim}, table));
        } else {
            d.weights.push_back(to_weight(hf_name_of(name), shape, v));
        }
    }
    if (!r.at_end()) BlobReader::fail("bytes left after the last tensor");
    return d;
}

std::vector<Weight> random_weights(const DemoOptions& o) {
    const int64_t dim = o.dim, head_dim = o.dim / o.n_heads;
    const int64_t q_dim = o.n_heads * head_dim, kv_dim = o.n_kv_heads * head_dim;
    Normal n(o.seed);
    // Scaled like a real initialisation (transformers' initializer_range 0.02); norm gains around 1 with enough
    // spread that the gain views show structure.
    constexpr double kStd = 0.02;
    std::vector<Weight> weights;
    weights.push_back(to_weight("model.embed_tokens.weight", {kVocab, dim}, normal(n, kVocab * dim, 0.0, kStd)));
    for (int64_t l = 0; l < o.n_layers; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        // wq, wk are drawn in Meta's layout (as model.py uses them) and stored permuted, as a real HF export is.
        auto wq = normal(n, q_dim * dim, 0.0, kStd);    // (n_heads * head_dim, dim)
        auto wk = normal(n, kv_dim * dim, 0.0, kStd);   // (n_kv_heads * head_dim, dim)
        weights.push_back(to_weight(p + "self_attn.q_proj.weight", {q_dim, dim}, permute_for_hf(wq, o.n_heads, head_dim, dim)));
        weights.push_back(to_weight(p + "self_attn.k_proj.weight", {kv_dim, dim}, permute_for_hf(wk, o.n_kv_heads, head_dim, dim)));
        weights.push_back(to_weight(p + "self_attn.v_proj.weight", {kv_dim, dim}, normal(n, kv_dim * dim, 0.0, kStd)));
        weights.push_back(to_weight(p + "self_attn.o_proj.weight", {dim, q_dim}, normal(n, dim * q_dim, 0.0, kStd)));
        weights.push_back(to_weight(p + "mlp.gate_proj.weight", {o.hidden_dim, dim}, normal(n, o.hidden_dim * dim, 0.0, kStd)));
        weights.push_back(to_weight(p + "mlp.down_proj.weight", {dim, o.hidden_dim}, normal(n, dim * o.hidden_dim, 0.0, kStd)));
        weights.push_back(to_weight(p + "mlp.up_proj.weight", {o.hidden_dim, dim}, normal(n, o.hidden_dim * dim, 0.0, kStd)));
        weights.push_back(to_weight(p + "input_layernorm.weight", {dim}, normal(n, dim, 1.0, 0.15)));
        weights.push_back(to_weight(p + "post_attention_layernorm.weight", {dim}, normal(n, dim, 1.0, 0.15)));
    }
    weights.push_back(to_weight("model.norm.weight", {dim}, normal(n, dim, 1.0, 0.15)));
    return weights;
}

}  // namespace

void make_demo_model(const fs::path& out_dir, const fs::path& tokenizer_json, const DemoOptions& o) {
    if (o.random) check_options(o);
    if (!fs::is_regular_file(tokenizer_json))
        throw TokenizerError(tokenizer_json.string() + ": no tokenizer.json there (the demonstration model uses the "
                             "real Llama 3 tokenizer; scripts/setup fetches it)");
    std::error_code ec;
    fs::create_directories(out_dir, ec);
    if (ec || !fs::is_directory(out_dir)) throw Error(out_dir.string() + ": cannot create folder: " + ec.message());

    std::vector<Weight> weights;
    json sizes;  // dim, n_layers, n_heads, n_kv_heads, hidden_dim
    std::string description;
    if (o.random) {
        weights = random_weights(o);
        sizes = {{"dim", o.dim}, {"n_layers", o.n_layers}, {"n_heads", o.n_heads}, {"n_kv_heads", o.n_kv_heads},
                 {"hidden_dim", o.hidden_dim}};
        description = "Random weights (seed " + std::to_string(o.seed) + "): not a trained model, its output is "
                      "meaningless text.";
    } else {
        TrainedDemo t = expand_trained();
        weights = std::move(t.weights);
        for (const char* k : {"dim", "n_layers", "n_heads", "n_kv_heads", "hidden_dim"}) sizes[k] = t.header.at(k);
        description = t.header.at("description").get<std::string>() + ".";
    }
    const int64_t dim = sizes["dim"], n_layers = sizes["n_layers"], n_heads = sizes["n_heads"];
    const int64_t n_kv_heads = sizes["n_kv_heads"], hidden_dim = sizes["hidden_dim"], head_dim = dim / n_heads;
    std::vector<safetensors::WriteTensor> out;
    for (const Weight& w : weights)
        out.push_back({w.hf_name, DType::BF16, w.shape,
                       std::as_bytes(std::span<const uint16_t>(w.bf16.data(), w.bf16.size()))});
    // Written under a temporary name and renamed, so an interrupted run never leaves a half model that loads.
    const fs::path tmp = out_dir / "model.safetensors.partial";
    safetensors::write(tmp.string(), out, {{"format", "pt"}, {"strata_demo", "true"}});
    fs::rename(tmp, out_dir / "model.safetensors", ec);
    if (ec) throw Error((out_dir / "model.safetensors").string() + ": cannot write: " + ec.message());

    // Instruct-style stop tokens (Llama 3.1 Instruct's), so the chat window and its template can be tried.
    const std::vector<int32_t> eos = {128001, 128008, 128009};
    json config = {
        {"architectures", {"LlamaForCausalLM"}},
        {"model_type", "llama"},
        {"strata_demo", true},
        {"strata_demo_trained", !o.random},
        {"strata_demo_description", description},
        {"hidden_size", dim},
        {"intermediate_size", hidden_dim},
        {"num_hidden_layers", n_layers},
        {"num_attention_heads", n_heads},
        {"num_key_value_heads", n_kv_heads},
        {"head_dim", head_dim},
        {"vocab_size", kVocab},
        {"rms_norm_eps", 1e-5},
        {"rope_theta", 500000.0},
        {"rope_scaling",
         {{"rope_type", "llama3"},
          {"factor", 8.0},
          {"low_freq_factor", 1.0},
          {"high_freq_factor", 4.0},
          {"original_max_position_embeddings", 8192}}},
        {"max_position_embeddings", 131072},
        // Tied like Llama 3.2: the 128256-row table is most of the file; a second copy would double it.
        {"tie_word_embeddings", true},
        {"bos_token_id", 128000},
        {"eos_token_id", eos},
        {"hidden_act", "silu"},
        {"attention_bias", false},
        {"mlp_bias", false},
        {"torch_dtype", "bfloat16"},
        {"initializer_range", 0.02},
    };
    if (o.random) config["strata_demo_seed"] = o.seed;
    else config["strata_demo_weights_sha256"] = std::string(detail::demo_blob_sha256());
    write_text(out_dir / "config.json", config.dump(2) + "\n");
    const json gen = {{"bos_token_id", 128000}, {"eos_token_id", eos}, {"do_sample", true},
                      {"temperature", 0.6}, {"top_p", 0.9}};
    write_text(out_dir / "generation_config.json", gen.dump(2) + "\n");

    if (fs::absolute(tokenizer_json).lexically_normal() != fs::absolute(out_dir / "tokenizer.json").lexically_normal()) {
        fs::copy_file(tokenizer_json, out_dir / "tokenizer.json", fs::copy_options::overwrite_existing, ec);
        if (ec) throw Error((out_dir / "tokenizer.json").string() + ": cannot copy the tokenizer: " + ec.message());
    }

    const std::string shape =
        "It has the Llama 3 architecture (grouped-query attention, SwiGLU, RMSNorm, Llama 3.1 scaled RoPE,\n"
        "tied embeddings as in Llama 3.2) and the real Llama 3 tokenizer (128256 tokens), with\n"
        "dim " + std::to_string(dim) + ", " + std::to_string(n_layers) + " layers, " + std::to_string(n_heads) +
        " query heads : " + std::to_string(n_kv_heads) + " KV heads, FFN " + std::to_string(hidden_dim) +
        ", stored in bf16 in Hugging Face layout.\n"
        "config.json marks it with \"strata_demo\": true, and Strata labels it as a demonstration.\n\n";
    const std::string what =
        o.random ? "RANDOM WEIGHTS. This is not a trained model: its output is meaningless text. The weights are\n"
                   "drawn from a normal distribution (std 0.02, norm gains around 1) with seed " +
                       std::to_string(o.seed) + ".\n\n"
                 : description + "\n\nIt knows only the small world of its generated training text (see\n"
                   "docs/demo-model.md in Strata's repository); every token id it never saw shares one embedding\n"
                   "row that the training pushed below every used token.\n\n";
    write_text(out_dir / "README.txt",
               "Strata demonstration model\n==========================\n\n" + what + shape +
               "It exists so that every view of Strata can be tried before a real checkpoint is downloaded.\n"
               "Made by `strata-cli make-demo`" + (o.random ? " --random" : "") + ".\n");
}

bool demo_model_is_current(const fs::path& out_dir) {
    std::ifstream f(out_dir / "config.json", std::ios::binary);
    if (!f || !fs::is_regular_file(out_dir / "model.safetensors")) return false;
    const json j = json::parse(f, nullptr, /*allow_exceptions=*/false);
    return j.is_object() && j.value("strata_demo_trained", false) &&
           j.value("strata_demo_weights_sha256", std::string()) == detail::demo_blob_sha256();
}

}  // namespace strata
