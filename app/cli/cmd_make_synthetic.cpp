// strata-cli make-synthetic: a Llama-3-shaped Hugging Face checkpoint with random bf16 weights, written fast
// (multithreaded, straight into a mapped file) for benchmarks at real sizes: --shape 1b (Llama 3.2 1B) or 8b
// (Llama 3 8B). Marked as a demonstration model: its outputs mean nothing.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "strata/dtype.hpp"
#include "strata/error.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace strata::cli {
namespace {

struct Shape {
    int64_t dim, n_layers, n_heads, n_kv_heads, hidden_dim;
    bool tied;
};

struct Entry {
    std::string name;
    std::vector<int64_t> shape;
    bool gain;  // RMSNorm gains are ~1, matrices are small and centred
    uint64_t begin = 0, end = 0;
};

// A counter-based generator (splitmix64): any element can be produced independently, so threads split freely.
inline uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

void fill(uint16_t* out, uint64_t n, uint64_t seed, bool gain) {
    for (uint64_t i = 0; i < n; ++i) {
        // Uniform in [-0.0346, 0.0346) has std 0.02, like Llama's initialisation scale.
        const double u = static_cast<double>(mix(seed + i) >> 11) * 0x1.0p-53 - 0.5;
        const float v = gain ? static_cast<float>(1.0 + 0.2 * u) : static_cast<float>(0.0693 * u);
        out[i] = f32_to_bf16(v);
    }
}

void write_text(const fs::path& file, const std::string& text) {
    std::ofstream f(file, std::ios::binary | std::ios::trunc);
    f << text;
    if (!f) throw Error(file.string() + ": cannot write");
}

int run_make_synthetic(const Args& args) {
    args.allow_only({"out", "shape", "tokenizer", "layers"});
    const fs::path out = args.require("out");
    const std::string preset = args.get_or("shape", "1b");
    Shape s;
    if (preset == "1b")
        s = {2048, 16, 32, 8, 8192, true};
    else if (preset == "8b")
        s = {4096, 32, 32, 8, 14336, false};
    else
        throw UsageError("--shape must be 1b or 8b");
    s.n_layers = args.get_int("layers", s.n_layers);
    if (s.n_layers < 1 || s.n_layers > 256) throw UsageError("--layers must be in [1, 256]");
    const int64_t vocab = 128256, head_dim = s.dim / s.n_heads;
    const fs::path tokenizer = args.require("tokenizer");
    if (!fs::exists(tokenizer)) throw Error(tokenizer.string() + ": no such tokenizer.json");
    fs::create_directories(out);

    std::vector<Entry> entries;
    entries.push_back({"model.embed_tokens.weight", {vocab, s.dim}, false});
    for (int64_t l = 0; l < s.n_layers; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        entries.push_back({p + "self_attn.q_proj.weight", {s.n_heads * head_dim, s.dim}, false});
        entries.push_back({p + "self_attn.k_proj.weight", {s.n_kv_heads * head_dim, s.dim}, false});
        entries.push_back({p + "self_attn.v_proj.weight", {s.n_kv_heads * head_dim, s.dim}, false});
        entries.push_back({p + "self_attn.o_proj.weight", {s.dim, s.n_heads * head_dim}, false});
        entries.push_back({p + "mlp.gate_proj.weight", {s.hidden_dim, s.dim}, false});
        entries.push_back({p + "mlp.down_proj.weight", {s.dim, s.hidden_dim}, false});
        entries.push_back({p + "mlp.up_proj.weight", {s.hidden_dim, s.dim}, false});
        entries.push_back({p + "input_layernorm.weight", {s.dim}, true});
        entries.push_back({p + "post_attention_layernorm.weight", {s.dim}, true});
    }
    entries.push_back({"model.norm.weight", {s.dim}, true});
    if (!s.tied) entries.push_back({"lm_head.weight", {vocab, s.dim}, false});

    json header = json::object();
    header["__metadata__"] = {{"format", "pt"}, {"strata_demo", "true"}};
    uint64_t offset = 0;
    for (auto& e : entries) {
        uint64_t n = 1;
        for (int64_t d : e.shape) n *= static_cast<uint64_t>(d);
        e.begin = offset;
        e.end = offset + 2 * n;
        offset = e.end;
        header[e.name] = {{"dtype", "BF16"}, {"shape", e.shape}, {"data_offsets", {e.begin, e.end}}};
    }
    std::string h = header.dump();
    h.append((8 - h.size() % 8) % 8, ' ');  // data starts 8-byte aligned
    const uint64_t data_start = 8 + h.size(), total = data_start + offset;

    const fs::path file = out / "model.safetensors";
    const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw Error(file.string() + ": cannot create: " + std::strerror(errno));
    if (::ftruncate(fd, static_cast<off_t>(total)) != 0) {
        ::close(fd);
        throw Error(file.string() + ": cannot size to " + std::to_string(total) + " bytes: " + std::strerror(errno));
    }
    void* map = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (map == MAP_FAILED) throw Error(file.string() + ": cannot map for writing: " + std::strerror(errno));
    auto* bytes = static_cast<unsigned char*>(map);
    const uint64_t hlen = h.size();
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(hlen >> (8 * i));
    std::memcpy(bytes + 8, h.data(), h.size());

    // Split every tensor into 16 MiB pieces and hand them out round-robin to the threads.
    struct Piece { uint64_t begin, n; uint64_t seed; bool gain; };
    std::vector<Piece> pieces;
    for (size_t t = 0; t < entries.size(); ++t) {
        const auto& e = entries[t];
        const uint64_t n = (e.end - e.begin) / 2, step = 8ull << 20;
        for (uint64_t i = 0; i < n; i += step)
            pieces.push_back({data_start + e.begin + 2 * i, std::min(step, n - i), (uint64_t(t) << 40) + i, e.gain});
    }
    const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::thread> pool;
    for (unsigned w = 0; w < threads; ++w)
        pool.emplace_back([&, w] {
            for (size_t i = w; i < pieces.size(); i += threads)
                fill(reinterpret_cast<uint16_t*>(bytes + pieces[i].begin), pieces[i].n, pieces[i].seed, pieces[i].gain);
        });
    for (auto& t : pool) t.join();
    ::munmap(map, total);

    const std::vector<int32_t> eos = {128001, 128008, 128009};
    json config = {{"architectures", {"LlamaForCausalLM"}},
                   {"model_type", "llama"},
                   {"strata_demo", true},
                   {"hidden_size", s.dim},
                   {"num_hidden_layers", s.n_layers},
                   {"num_attention_heads", s.n_heads},
                   {"num_key_value_heads", s.n_kv_heads},
                   {"head_dim", head_dim},
                   {"intermediate_size", s.hidden_dim},
                   {"vocab_size", vocab},
                   {"rms_norm_eps", 1e-5},
                   {"rope_theta", 500000.0},
                   {"rope_scaling", {{"rope_type", "llama3"}, {"factor", 32.0}, {"low_freq_factor", 1.0},
                                     {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}}},
                   {"max_position_embeddings", 131072},
                   {"tie_word_embeddings", s.tied},
                   {"bos_token_id", 128000},
                   {"eos_token_id", eos},
                   {"torch_dtype", "bfloat16"}};
    write_text(out / "config.json", config.dump(2) + "\n");
    write_text(out / "generation_config.json", json({{"bos_token_id", 128000}, {"eos_token_id", eos}}).dump(2) + "\n");
    fs::copy_file(tokenizer, out / "tokenizer.json", fs::copy_options::overwrite_existing);
    std::printf("%s\n", json({{"path", out.string()}, {"shape", preset}, {"layers", s.n_layers},
                              {"file_bytes", total}}).dump(2).c_str());
    return 0;
}

}  // namespace

STRATA_COMMAND(Command{"make-synthetic", "--out DIR --tokenizer PATH [--shape 1b|8b] [--layers N]",
                       "write a Llama-3-shaped checkpoint of random bf16 weights, for benchmarks at real sizes",
                       run_make_synthetic,
                       {{"out", "DIR", "the folder to write (created)"},
                        {"tokenizer", "PATH", "the Llama 3 tokenizer.json to copy in"},
                        {"shape", "1b|8b", "Llama 3.2 1B or Llama 3 8B dimensions (default 1b)"},
                        {"layers", "N", "fewer blocks than the real model, for quicker runs"}}});

}  // namespace strata::cli
