// write_gguf: a loaded model as a GGUF file in llama.cpp's conventions (names, metadata keys, tokenizer), so the
// file opens in llama.cpp and friends as well as in Strata.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numbers>
#include <tuple>
#include <unordered_map>

#include <unistd.h>

#include "cpu/thread_pool.hpp"
#include "strata/error.hpp"
#include "strata/gguf.hpp"
#include "strata/quant.hpp"
#include "strata/writers.hpp"

namespace fs = std::filesystem;

namespace strata {

namespace {

using gguf::Value;
using gguf::ValueType;

// llama.cpp's llama_token_type values.
constexpr int64_t kTokenNormal = 1;
constexpr int64_t kTokenControl = 3;
constexpr int64_t kTokenUnused = 5;

}  // namespace

// llama_ftype (llama.h): what most of the weights are. A uniform K type is numbered as llama.cpp's "_S" mix
// of that type, the nearest it has.
uint32_t gguf_file_type(DType t) {
    switch (t) {
        case DType::F32: return 0;    // LLAMA_FTYPE_ALL_F32
        case DType::F16: return 1;    // LLAMA_FTYPE_MOSTLY_F16
        case DType::Q4_0: return 2;   // LLAMA_FTYPE_MOSTLY_Q4_0
        case DType::Q8_0: return 7;   // LLAMA_FTYPE_MOSTLY_Q8_0
        case DType::Q4_K: return 14;  // LLAMA_FTYPE_MOSTLY_Q4_K_S
        case DType::Q5_K: return 16;  // LLAMA_FTYPE_MOSTLY_Q5_K_S
        case DType::Q6_K: return 18;  // LLAMA_FTYPE_MOSTLY_Q6_K
        case DType::BF16: return 32;  // LLAMA_FTYPE_MOSTLY_BF16
    }
    throw UnsupportedError("write_gguf: no GGUF file type for " + std::string(dtype_name(t)));
}

namespace {

// The Llama 3 instruct template, for tools that format chats from the file (Strata builds its own).
constexpr const char* kChatTemplate =
    "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";

std::string gguf_name(const std::string& canonical) {
    if (canonical == "tok_embeddings") return "token_embd.weight";
    if (canonical == "norm") return "output_norm.weight";
    if (canonical == "output") return "output.weight";
    static const std::pair<const char*, const char*> kLayer[] = {
        {"attention.wq", "attn_q"},      {"attention.wk", "attn_k"},     {"attention.wv", "attn_v"},
        {"attention.wo", "attn_output"}, {"feed_forward.w1", "ffn_gate"}, {"feed_forward.w2", "ffn_down"},
        {"feed_forward.w3", "ffn_up"},   {"attention_norm", "attn_norm"}, {"ffn_norm", "ffn_norm"},
    };
    const size_t dot = canonical.find('.', 7);  // after "layers."
    if (canonical.rfind("layers.", 0) == 0 && dot != std::string::npos) {
        const std::string n = canonical.substr(7, dot - 7), rest = canonical.substr(dot + 1);
        for (const auto& [from, to] : kLayer)
            if (rest == from) return "blk." + n + "." + to + ".weight";
    }
    throw Error("write_gguf: no GGUF name for tensor " + canonical);
}

// Streams a tensor's canonical rows: a permuted (Hugging Face) q/k is written row by row in Meta order, anything
// else in one piece.
void check_cancel(const std::atomic<bool>* cancel) {
    if (cancel && cancel->load()) throw Cancelled();
}

void write_rows(std::ostream& os, const TensorView& t, const std::atomic<bool>* cancel) {
    if (t.rope_heads <= 0 || t.shape.size() < 2) {
        constexpr uint64_t kPiece = 4ull << 20;  // a cancel is noticed within a few MB
        for (uint64_t at = 0; at < t.nbytes; at += kPiece) {
            check_cancel(cancel);
            os.write(reinterpret_cast<const char*>(t.data + at), static_cast<std::streamsize>(std::min(kPiece, t.nbytes - at)));
        }
        return;
    }
    for (int64_t r = 0; r < t.rows(); ++r) {
        if (r % 1024 == 0) check_cancel(cancel);
        os.write(reinterpret_cast<const char*>(t.row_ptr(r)), static_cast<std::streamsize>(t.row_bytes()));
    }
}

// Streams a tensor's canonical rows converted to `to`: batches of rows (about 4 MiB of float32) are widened and
// converted in parallel, then written in order.
void write_converted(std::ostream& os, const TensorView& t, DType to, cpu::ThreadPool& pool,
                     const std::atomic<bool>* cancel) {
    const int64_t rows = t.shape.size() < 2 ? 1 : t.rows(), cols = t.cols();
    const uint64_t out_row = dtype_bytes(to, cols);
    const int64_t batch = std::max<int64_t>(1, (int64_t{1} << 20) / std::max<int64_t>(cols, 1));
    std::vector<std::byte> buf(static_cast<size_t>(std::min(batch, rows)) * out_row);
    for (int64_t r0 = 0; r0 < rows; r0 += batch) {
        check_cancel(cancel);
        const int64_t n = std::min(batch, rows - r0);
        pool.parallel_for(n, 1, [&](int64_t i0, int64_t i1) {
            std::vector<float> f(static_cast<size_t>(cols));  // [cols]
            for (int64_t i = i0; i < i1; ++i) {
                t.row_to_f32(r0 + i, f.data());
                std::byte* o = buf.data() + static_cast<uint64_t>(i) * out_row;
                switch (to) {
                    case DType::F32: std::memcpy(o, f.data(), out_row); break;
                    case DType::F16:
                    case DType::BF16:
                        for (int64_t c = 0; c < cols; ++c) {
                            const uint16_t h = to == DType::F16 ? f32_to_f16(f[c]) : f32_to_bf16(f[c]);
                            std::memcpy(o + 2 * c, &h, 2);
                        }
                        break;
                    default: quant::quantize(to, f.data(), o, cols); break;
                }
            }
        });
        os.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(n * out_row));
    }
}

}  // namespace

std::vector<std::string> gguf_weight_order(const ModelConfig& c) {
    std::vector<std::string> order{"tok_embeddings"};
    for (int64_t i = 0; i < c.n_layers; ++i)
        for (const char* s : {"attention_norm", "attention.wq", "attention.wk", "attention.wv", "attention.wo",
                              "ffn_norm", "feed_forward.w1", "feed_forward.w2", "feed_forward.w3"})
            order.push_back(names::layer(i, s));
    order.push_back("norm");
    if (!c.tie_embeddings) order.push_back("output");
    return order;
}

std::vector<float> llama31_rope_factors(const ModelConfig& c) {
    const RopeScaling& s = c.rope_scaling;
    const double low_wavelen = static_cast<double>(s.original_max_position_embeddings) / s.low_freq_factor;
    const double high_wavelen = static_cast<double>(s.original_max_position_embeddings) / s.high_freq_factor;
    std::vector<float> factors(static_cast<size_t>(c.head_dim / 2));
    for (size_t i = 0; i < factors.size(); ++i) {
        const double freq = 1.0 / std::pow(static_cast<double>(c.rope_theta),
                                           static_cast<double>(2 * i) / static_cast<double>(c.head_dim));
        const double wavelen = 2.0 * std::numbers::pi / freq;
        double f = 1.0;  // high frequencies (short wavelengths) are kept
        if (wavelen > low_wavelen) {
            f = s.factor;  // low frequencies are divided by the full factor
        } else if (wavelen >= high_wavelen) {
            // In between, apply_scaling blends freq/factor and freq: freq * ((1 - smooth)/factor + smooth).
            const double smooth = (static_cast<double>(s.original_max_position_embeddings) / wavelen - s.low_freq_factor) /
                                  (s.high_freq_factor - s.low_freq_factor);
            f = 1.0 / ((1.0 - smooth) / s.factor + smooth);
        }
        factors[i] = static_cast<float>(f);
    }
    return factors;
}

std::vector<std::pair<std::string, std::string>> bpe_merges(const Tokenizer& tok) {
    const int32_t n = tok.vocab_size();
    std::unordered_map<std::string, int32_t> rank;
    rank.reserve(static_cast<size_t>(n));
    for (int32_t id = 0; id < n; ++id)
        if (!tok.is_special(id)) rank.emplace(tok.token_bytes(id), id);
    std::vector<std::pair<std::string, std::string>> merges;
    struct Split {
        int32_t left, right;
        size_t at;
    };
    std::vector<Split> splits;
    for (int32_t id = 0; id < n; ++id) {
        if (tok.is_special(id)) continue;
        const std::string& b = tok.token_bytes(id);
        splits.clear();
        for (size_t at = 1; at < b.size(); ++at) {
            auto l = rank.find(b.substr(0, at));
            auto r = rank.find(b.substr(at));
            if (l != rank.end() && r != rank.end()) splits.push_back({l->second, r->second, at});
        }
        std::sort(splits.begin(), splits.end(),
                  [](const Split& a, const Split& c) { return std::tie(a.left, a.right) < std::tie(c.left, c.right); });
        for (const Split& s : splits) merges.emplace_back(b.substr(0, s.at), b.substr(s.at));
    }
    return merges;
}

void write_gguf(const Model& model, const fs::path& out) { write_gguf(model, out, GgufWriteOptions{}); }

void write_gguf(const Model& model, const fs::path& final_out, const GgufWriteOptions& options) {
    const ModelConfig& c = model.config;
    if (fs::is_directory(final_out)) throw Error("write_gguf: " + final_out.string() + " is a folder");
    // A temporary name beside the target (same file system, so the rename is atomic).
    // (Appended, not "." + string: GCC 12 warns falsely of an overlapping memcpy in that operator+, bug 105329.)
    std::string tmp_name = ".";
    tmp_name += final_out.filename().string();
    tmp_name += ".tmp-" + std::to_string(::getpid());
    const fs::path out = final_out.parent_path() / tmp_name;
    const Tokenizer& tok = model.tokenizer;
    if (tok.empty()) throw TokenizerError("write_gguf: the model has no tokenizer to embed in " + final_out.string());

    gguf::Writer w;
    w.set("general.architecture", Value::string("llama"));
    w.set("general.name", Value::string(c.name));
    auto type_of = [&](const std::string& name) {
        auto it = options.types.find(name);
        return it != options.types.end() ? it->second : model.tensor(name).dtype;
    };
    w.set("general.file_type", Value::u32(options.file_type ? *options.file_type
                                                            : gguf_file_type(type_of("tok_embeddings"))));
    bool quantized = false;
    for (const auto& [name, t] : model.tensors) quantized = quantized || dtype_is_block(type_of(name));
    if (quantized) w.set("general.quantization_version", Value::u32(2));  // ggml's current block layouts
    w.set("llama.vocab_size", Value::u32(static_cast<uint32_t>(c.vocab_size)));
    w.set("llama.context_length", Value::u32(static_cast<uint32_t>(c.max_seq_len)));
    w.set("llama.embedding_length", Value::u32(static_cast<uint32_t>(c.dim)));
    w.set("llama.block_count", Value::u32(static_cast<uint32_t>(c.n_layers)));
    w.set("llama.feed_forward_length", Value::u32(static_cast<uint32_t>(c.hidden_dim)));
    w.set("llama.rope.dimension_count", Value::u32(static_cast<uint32_t>(c.head_dim)));
    w.set("llama.attention.head_count", Value::u32(static_cast<uint32_t>(c.n_heads)));
    w.set("llama.attention.head_count_kv", Value::u32(static_cast<uint32_t>(c.n_kv_heads)));
    w.set("llama.attention.key_length", Value::u32(static_cast<uint32_t>(c.head_dim)));
    w.set("llama.attention.value_length", Value::u32(static_cast<uint32_t>(c.head_dim)));
    w.set("llama.attention.layer_norm_rms_epsilon", Value::f32(c.norm_eps));
    w.set("llama.rope.freq_base", Value::f32(c.rope_theta));

    // The vocabulary: tokens in GPT-2's byte-to-unicode spelling, specials as control tokens, padding rows of a
    // larger embedding table as unused placeholders (GGUF needs one token per row).
    const int32_t n_tok = tok.vocab_size();
    std::vector<std::string> tokens;
    std::vector<int64_t> types;
    tokens.reserve(static_cast<size_t>(c.vocab_size));
    types.reserve(static_cast<size_t>(c.vocab_size));
    for (int32_t id = 0; id < n_tok; ++id) {
        tokens.push_back(tok.token_gpt2_string(id));
        types.push_back(tok.is_special(id) ? kTokenControl : kTokenNormal);
    }
    for (int64_t id = n_tok; id < c.vocab_size; ++id) {
        tokens.push_back("[PAD" + std::to_string(id) + "]");
        types.push_back(kTokenUnused);
    }
    std::vector<std::string> merges;
    for (const auto& [l, r] : bpe_merges(tok))
        merges.push_back(bytes_to_gpt2_unicode(l) + " " + bytes_to_gpt2_unicode(r));
    w.set("tokenizer.ggml.model", Value::string("gpt2"));
    w.set("tokenizer.ggml.pre", Value::string("llama-bpe"));
    w.set("tokenizer.ggml.tokens", Value::string_array(std::move(tokens)));
    w.set("tokenizer.ggml.token_type", Value::int_array(ValueType::Int32, std::move(types)));
    w.set("tokenizer.ggml.merges", Value::string_array(std::move(merges)));
    w.set("tokenizer.ggml.bos_token_id", Value::u32(static_cast<uint32_t>(c.bos_id)));
    if (!c.eos_ids.empty()) w.set("tokenizer.ggml.eos_token_id", Value::u32(static_cast<uint32_t>(c.eos_ids[0])));
    // llama.cpp stops on its end-of-turn / end-of-message ids as well.
    for (auto [text, key] : {std::pair{"<|eot_id|>", "tokenizer.ggml.eot_token_id"},
                             std::pair{"<|eom_id|>", "tokenizer.ggml.eom_token_id"}}) {
        const auto id = tok.special_id(text);
        if (id && std::find(c.eos_ids.begin(), c.eos_ids.end(), *id) != c.eos_ids.end())
            w.set(key, Value::u32(static_cast<uint32_t>(*id)));
    }
    w.set("tokenizer.ggml.add_bos_token", Value::boolean(true));
    if (c.is_instruct) w.set("tokenizer.chat_template", Value::string(kChatTemplate));
    // Strata's own keys (other tools ignore them): the complete stop list and the demonstration-model mark.
    std::vector<int64_t> eos(c.eos_ids.begin(), c.eos_ids.end());
    w.set("strata.eos_token_ids", Value::int_array(ValueType::Int32, std::move(eos)));
    if (c.is_demo) w.set("strata.demo", Value::boolean(true));

    // Tensors in llama.cpp's order: rope_freqs, token_embd, blocks, output_norm, output.
    std::vector<float> factors = model.rope_freqs_factors;
    if (factors.empty() && c.rope_scaling.enabled) factors = llama31_rope_factors(c);
    if (!factors.empty()) {
        auto shared = std::make_shared<std::vector<float>>(std::move(factors));
        const uint64_t nbytes = shared->size() * sizeof(float);
        w.add_tensor("rope_freqs.weight", {shared->size()}, gguf::type_id(DType::F32), nbytes,
                     [shared, nbytes](std::ostream& os) {
                         os.write(reinterpret_cast<const char*>(shared->data()), static_cast<std::streamsize>(nbytes));
                     });
    }
    const std::vector<std::string> order = gguf_weight_order(c);
    std::unique_ptr<cpu::ThreadPool> pool;
    int64_t done = 0;
    const auto total = static_cast<int64_t>(order.size());
    for (const std::string& name : order) {
        const TensorView& t = model.tensor(name);
        const DType to = type_of(name);
        std::vector<uint64_t> ne(t.shape.rbegin(), t.shape.rend());
        const int64_t cols = t.cols();
        if (dtype_is_block(to) && cols % dtype_block_size(to) != 0)
            throw InputError("write_gguf: " + name + " has rows of " + std::to_string(cols) + " weights, not a multiple "
                             "of the " + std::to_string(dtype_block_size(to)) + "-weight blocks of " +
                             std::string(dtype_name(to)));
        if (to == t.dtype) {
            w.add_tensor(gguf_name(name), std::move(ne), gguf::type_id(t.dtype), t.nbytes,
                         [&, name, to](std::ostream& os) {
                             if (options.on_tensor) options.on_tensor(name, to, done++, total);
                             write_rows(os, t, options.cancel);
                         });
            continue;
        }
        if (!pool) pool = std::make_unique<cpu::ThreadPool>(options.threads);
        const uint64_t nbytes = dtype_bytes(to, cols) * static_cast<uint64_t>(t.shape.size() < 2 ? 1 : t.rows());
        w.add_tensor(gguf_name(name), std::move(ne), gguf::type_id(to), nbytes, [&, name, to](std::ostream& os) {
            if (options.on_tensor) options.on_tensor(name, to, done++, total);
            write_converted(os, t, to, *pool, options.cancel);
        });
    }
    try {
        w.write(out);
        std::error_code ec;
        fs::rename(out, final_out, ec);
        if (ec) throw Error("write_gguf: cannot rename " + out.string() + " to " + final_out.string() + ": " + ec.message());
    } catch (...) {
        std::error_code ignored;
        fs::remove(out, ignored);
        throw;
    }
}

}  // namespace strata
