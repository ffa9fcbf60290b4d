// Meta's original checkpoints (meta-llama/llama3, llama-models): params.json (ModelArgs), consolidated.00.pth
// (torch.save of the state dict: a zip whose data.pkl names storages kept as members data/<key>) and
// tokenizer.model (tiktoken ranks). Names are already model.py's; rows are already Meta's interleaved layout.
//
// Fields a Meta folder does not record, and what Strata assumes (documented in the formats test):
//   max_seq_len  params.json's "max_seq_len" when present, else 131072 with use_scaled_rope (Llama 3.1/3.2),
//                8192 without (Llama 3)
//   eos_ids      <|end_of_text|> (Meta's generate also stops on <|eot_id|> / <|eom_id|>, as Strata always does)
//   is_instruct  the folder name contains "instruct" (params.json is the same for base and instruct models)
//   specials     Llama 3.1's names when use_scaled_rope is set, else Llama 3's (same ids for the shared ones)
#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "pickle.hpp"
#include "torch_zip.hpp"
#include "strata/error.hpp"
#include "strata/model.hpp"
#include "untrusted_json.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace strata {

namespace {

// params.json is a few hundred bytes; the same limit as config.json's (huggingface.cpp).
constexpr uintmax_t kMaxParamsBytes = 16ull << 20;

json read_params(const fs::path& file) {
    std::error_code ec;
    if (const uintmax_t size = fs::file_size(file, ec); !ec && size > kMaxParamsBytes)
        throw FormatError(file.string() + ": " + std::to_string(size) + " bytes is larger than the " +
                          std::to_string(kMaxParamsBytes) + "-byte limit for this file");
    std::ifstream f(file, std::ios::binary);
    if (!f) throw FormatError(file.string() + ": cannot open");
    std::ostringstream s;
    s << f.rdbuf();
    const json j = untrusted_json::parse<FormatError>(s.str(), file.string());
    if (!j.is_object()) throw FormatError(file.string() + ": not a JSON object");
    return j;
}

struct Params {
    const json& j;
    std::string file;

    bool has(const char* k) const { return j.contains(k) && !j[k].is_null(); }
    int64_t integer(const char* k) const {
        if (!has(k)) throw FormatError(file + ": missing \"" + k + "\"");
        if (!j[k].is_number_integer()) throw FormatError(file + ": \"" + k + "\" must be an integer, found " + untrusted_json::describe(j[k]));
        return j[k].get<int64_t>();
    }
    int64_t integer(const char* k, int64_t fallback) const { return has(k) ? integer(k) : fallback; }
    double number(const char* k, double fallback) const {
        if (!has(k)) return fallback;
        if (!j[k].is_number()) throw FormatError(file + ": \"" + k + "\" must be a number, found " + untrusted_json::describe(j[k]));
        return j[k].get<double>();
    }
    bool boolean(const char* k, bool fallback) const {
        if (!has(k)) return fallback;
        if (!j[k].is_boolean()) throw FormatError(file + ": \"" + k + "\" must be true or false, found " + untrusted_json::describe(j[k]));
        return j[k].get<bool>();
    }
};

std::string folder_name(const fs::path& dir) {
    fs::path p = dir.lexically_normal();
    if (p.filename().empty()) p = p.parent_path();
    std::string n = p.filename().string();
    return n.empty() ? dir.string() : n;
}

bool contains_ci(std::string s, std::string_view needle) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    return s.find(needle) != std::string::npos;
}

// model.py's ModelArgs from params.json. vocab_size may be absent (-1: "defined later by tokenizer").
ModelConfig parse_params(const fs::path& dir) {
    const fs::path file = dir / "params.json";
    const json j = read_params(file);
    const Params p{j, file.string()};
    ModelConfig c;
    c.name = folder_name(dir);
    c.dim = p.integer("dim");
    c.n_layers = p.integer("n_layers");
    c.n_heads = p.integer("n_heads");
    c.n_kv_heads = p.integer("n_kv_heads", c.n_heads);
    if (c.n_heads <= 0 || c.dim % c.n_heads != 0)
        throw ModelError(file.string() + ": dim " + std::to_string(c.dim) + " is not a multiple of n_heads " +
                         std::to_string(c.n_heads));
    c.head_dim = c.dim / c.n_heads;
    const int64_t multiple_of = p.integer("multiple_of", 256);
    const double ffn_dim_multiplier = p.number("ffn_dim_multiplier", 0.0);
    if (multiple_of <= 0 || multiple_of > (int64_t(1) << 24))
        throw ModelError(file.string() + ": multiple_of " + std::to_string(multiple_of) + " is out of range");
    if (ffn_dim_multiplier < 0.0 || ffn_dim_multiplier > 64.0)
        throw ModelError(file.string() + ": ffn_dim_multiplier " + std::to_string(ffn_dim_multiplier) +
                         " is out of range");
    if (c.dim > 0 && c.dim < (int64_t(1) << 24)) c.hidden_dim = meta_hidden_dim(c.dim, multiple_of, ffn_dim_multiplier);
    c.vocab_size = p.integer("vocab_size", -1);
    c.norm_eps = static_cast<float>(p.number("norm_eps", 1e-5));
    c.rope_theta = static_cast<float>(p.number("rope_theta", 500000.0));  // Llama 3's ModelArgs default
    if (p.boolean("use_scaled_rope", false)) {
        // apply_scaling's constants; llama-models later made the factor a parameter (32 for Llama 3.2 1B/3B).
        c.rope_scaling.enabled = true;
        c.rope_scaling.factor = static_cast<float>(p.number("rope_scaling_factor", 8.0));
        c.rope_scaling.low_freq_factor = static_cast<float>(p.number("low_freq_factor", 1.0));
        c.rope_scaling.high_freq_factor = static_cast<float>(p.number("high_freq_factor", 4.0));
        c.rope_scaling.original_max_position_embeddings = p.integer("original_max_position_embeddings", 8192);
    }
    c.max_seq_len = p.integer("max_seq_len", c.rope_scaling.enabled ? 131072 : 8192);
    c.is_instruct = contains_ci(c.name, "instruct");
    return c;
}

// The single shard; more than one means a model-parallel checkpoint (70B: 8 shards) that must be merged first.
fs::path find_shard(const fs::path& dir) {
    std::vector<std::string> shards;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        const std::string n = e.path().filename().string();
        if (n.rfind("consolidated.", 0) == 0 && n.ends_with(".pth")) shards.push_back(n);
    }
    std::sort(shards.begin(), shards.end());
    if (shards.empty())
        throw FormatError(dir.string() + ": params.json but no consolidated.00.pth (Meta's weights file)");
    if (shards.size() > 1)
        throw UnsupportedError(dir.string() + ": " + std::to_string(shards.size()) + " shards (" + shards.front() +
                               " ... " + shards.back() +
                               ") form a model-parallel checkpoint; Strata reads single-shard Meta checkpoints "
                               "(Llama 3 8B, 3.2 1B/3B) only");
    if (shards.front() != "consolidated.00.pth")
        throw FormatError(dir.string() + ": found " + shards.front() + " but no consolidated.00.pth");
    return dir / shards.front();
}

void check_cancel(const LoadProgress& p) {
    if (p.cancel && p.cancel->load()) throw Cancelled();
}

std::string shape_str(const std::vector<int64_t>& s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
}

}  // namespace

std::unique_ptr<Model> load_meta(const fs::path& dir, const LoadProgress& progress) {
    if (!fs::is_directory(dir)) throw FormatError(dir.string() + ": not a folder");
    if (!fs::exists(dir / "params.json"))
        throw FormatError("no model in " + dir.string() + ": expected params.json (Meta)");
    check_cancel(progress);
    auto m = std::make_unique<Model>();
    m->format = CheckpointFormat::Meta;
    m->path = dir;
    m->config = parse_params(dir);

    const fs::path tok = dir / "tokenizer.model";
    if (!fs::exists(tok))
        throw TokenizerError("no tokenizer in " + dir.string() + ": expected tokenizer.model next to params.json");
    // The rank file is the same for Llama 3 and 3.1; Meta's code names the special tokens differently (3.1 has
    // <|eom_id|>, <|python_tag|>), and 3.1 is the release that introduced use_scaled_rope.
    m->tokenizer = Tokenizer::from_tiktoken(tok, m->config.rope_scaling.enabled ? MetaSpecials::Llama31
                                                                                : MetaSpecials::Llama3);
    ModelConfig& c = m->config;
    if (c.vocab_size <= 0) c.vocab_size = m->tokenizer.vocab_size();
    if (auto id = m->tokenizer.special_id("<|begin_of_text|>")) c.bos_id = *id;
    if (auto id = m->tokenizer.special_id("<|end_of_text|>")) c.eos_ids = {*id};

    const fs::path pth = find_shard(dir);
    const std::string fname = pth.string();
    MappedFile file(pth);
    const torch_zip::Archive zip(file.bytes(), fname);

    // torch.save puts everything under one folder named after the file ("consolidated/" or "archive/").
    const torch_zip::Member* pkl = nullptr;
    for (const torch_zip::Member& mem : zip.members())
        if (mem.name.ends_with("/data.pkl") && mem.name.find('/') == mem.name.size() - 9) {
            if (pkl) throw FormatError(fname + ": two pickles (" + pkl->name + ", " + mem.name + ")");
            pkl = &mem;
        }
    if (!pkl) throw FormatError(fname + ": no <archive>/data.pkl member: not a torch.save checkpoint");
    const std::string prefix = pkl->name.substr(0, pkl->name.size() - 8);  // "consolidated/"
    if (const torch_zip::Member* bo = zip.find(prefix + "byteorder")) {
        const auto b = zip.checked_data(*bo);
        const std::string order(reinterpret_cast<const char*>(b.data()), b.size());
        if (order != "little")
            throw UnsupportedError(fname + ": tensors were saved " + order + "-endian; Strata reads little-endian");
    }
    const std::vector<pickle::Tensor> records = pickle::read_state_dict(zip.checked_data(*pkl), fname + ":" + pkl->name);

    int64_t done = 0;
    const auto total = static_cast<int64_t>(records.size());
    for (const pickle::Tensor& r : records) {
        const std::string where = fname + ": tensor " + r.name;
        // Llama 2 checkpoints kept the RoPE frequencies as a buffer; they follow from the config.
        if (r.name == "rope.freqs") continue;
        if (!r.name.ends_with(".weight"))
            throw ModelError(where + " is not a weight of model.py's Transformer");
        const std::string name = r.name.substr(0, r.name.size() - 7);
        const std::string member_name = prefix + "data/" + r.storage.key;
        const torch_zip::Member* mem = zip.find(member_name);
        if (!mem)
            throw FormatError(where + " uses storage \"" + r.storage.key + "\" but the archive has no member " +
                              member_name);
        const auto bytes = zip.data(*mem);
        const uint64_t esize = dtype_bytes(r.storage.dtype, 1);
        // A view into a larger storage is fine as long as it is a dense row-major block of it.
        int64_t numel = 1;
        for (int64_t d : r.shape) {
            if (d != 0 && numel > INT64_MAX / d) throw FormatError(where + ": shape " + shape_str(r.shape) + " overflows");
            numel *= d;
        }
        const std::vector<int64_t> dense = pickle::contiguous_strides(r.shape);
        for (size_t k = 0; k < r.shape.size(); ++k)
            if (r.shape[k] > 1 && r.stride[k] != dense[k])
                throw UnsupportedError(where + " is not contiguous: shape " + shape_str(r.shape) + " with stride " +
                                       shape_str(r.stride) + " (expected " + shape_str(dense) + ")");
        if (r.storage_offset > r.storage.numel || numel > r.storage.numel - r.storage_offset)
            throw FormatError(where + ": elements [" + std::to_string(r.storage_offset) + ", +" +
                              std::to_string(numel) + ") lie outside its storage of " +
                              std::to_string(r.storage.numel));
        if (static_cast<uint64_t>(r.storage.numel) > bytes.size() / esize)
            throw FormatError(where + ": storage \"" + r.storage.key + "\" claims " + std::to_string(r.storage.numel) +
                              " " + std::string(dtype_name(r.storage.dtype)) + " elements (" +
                              std::to_string(r.storage.numel * static_cast<int64_t>(esize)) + " bytes) but member " +
                              member_name + " has " + std::to_string(bytes.size()) + " bytes");
        if (m->tensors.count(name)) throw FormatError(where + " appears twice");
        TensorView t;
        t.name = name;
        t.source_name = r.name;
        t.dtype = r.storage.dtype;
        t.shape = r.shape;
        t.data = bytes.data() + r.storage_offset * static_cast<int64_t>(esize);
        t.nbytes = static_cast<uint64_t>(numel) * esize;
        t.file = fname;
        t.file_offset = static_cast<uint64_t>(t.data - file.data());
        const uint64_t reached = t.file_offset + t.nbytes;
        m->tensors.emplace(name, std::move(t));
        ++done;
        if (progress.on_progress) progress.on_progress(reached, file.size(), done, total);
    }
    // Llama 3.2 (1B, 3B) ties the output projection to the embeddings: its checkpoints have no output.weight.
    c.tie_embeddings = m->tensors.count("output") == 0;
    m->files.push_back(std::move(file));
    m->validate_shapes();
    check_cancel(progress);
    if (m->tokenizer.vocab_size() > c.vocab_size)
        throw ModelError(tok.string() + ": " + std::to_string(m->tokenizer.vocab_size()) +
                         " tokens, but the embedding table has only " + std::to_string(c.vocab_size) + " rows");
    return m;
}

}  // namespace strata
