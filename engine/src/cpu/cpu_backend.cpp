#include "cpu/cpu_backend.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <unordered_set>

#include "cpu/kernels.hpp"
#include "strata/error.hpp"
#include "strata/host_memory.hpp"
#include "strata/quant.hpp"

namespace strata::cpu {

namespace {

std::string cpu_model_name() {
    std::ifstream f("/proc/cpuinfo");
    std::string line;
    while (std::getline(f, line)) {
        if (line.rfind("model name", 0) == 0) {
            auto colon = line.find(':');
            if (colon != std::string::npos) {
                std::string name = line.substr(colon + 1);
                while (!name.empty() && name.front() == ' ') name.erase(name.begin());
                return name;
            }
        }
    }
    return "CPU";
}

// model.py's silu(w1(x)) * w3(x) for one element: silu(a) = a * sigmoid(a).
inline float silu_gate(float a, float b) { return a / (1.0f + std::exp(-a)) * b; }

// Rows per unit of a product's work in the thread pool (chunks are multiples of it).
constexpr int64_t kRowGrain = 16;

// A prompt's tokens go through attention this many at a time (with their query heads), each block of key and
// value rows read once for all of them.
constexpr int64_t kAttendTokens = 8;

// Orders logits for top-k: larger value first, lower id on ties; NaN sorts after everything so that a broken
// row still gives a strict weak ordering.
bool ranks_before(float a, int32_t ia, float b, int32_t ib) {
    const bool na = std::isnan(a), nb = std::isnan(b);
    if (na != nb) return nb;
    if (!na && a != b) return a > b;
    return ia < ib;
}

CpuIsa chosen_isa(const std::string& name) {
    if (name.empty()) return best_cpu_isa();
    const CpuIsa isa = cpu_isa_from_name(name);
    if (!cpu_isa_supported(isa))
        throw UnsupportedError("this CPU cannot run the " + std::string(cpu_isa_name(isa)) + " kernels");
    return isa;
}

}  // namespace

CpuBackend::CpuBackend(const BackendOptions& options)
    : pool_(options.threads), isa_(chosen_isa(options.cpu_isa)), exact_(options.exact) {
    float_isa_ = isa_ == CpuIsa::Avx512Vnni && options.cpu_isa.empty() && !cpu_wide_float_kernels() ? CpuIsa::Avx2
                                                                                                     : isa_;
}

BackendInfo CpuBackend::info() const {
    BackendInfo i;
    i.backend = "cpu";
    i.device = cpu_model_name() + " (" + std::to_string(pool_.size()) + " threads)";
    i.device_type = "cpu";
    i.driver = "strata cpu reference";
    i.kernels = std::string(cpu_isa_name(isa_)) +
                (float_isa_ != isa_ ? " (256-bit float kernels, 256-bit Q4_K / Q5_K prefill kernels)" : "") +
                (exact_                        ? ", exact float32"
                 : isa_ == CpuIsa::Generic ? ", integer-dot for block types"
                                               : ", integer-dot for block types, binary16 activations for F16") +
                (grouped_bytes_ > 0 ? ", wide rows in groups of " + std::to_string(quant::kGroupRows) + " for decode"
                                    : "");
    return i;
}

void CpuBackend::load(const Model& model, const LoadProgress& progress) {
    model.config.validate();
    int64_t done = 0;
    const int64_t total = static_cast<int64_t>(model.tensors.size());
    uint64_t bytes = 0, total_bytes = 0;
    for (const auto& [name, t] : model.tensors) total_bytes += t.nbytes;
    // Weights stay where they are mapped; only check now that every one can be widened, so that an
    // unsupported type fails at load and not in the middle of a forward pass. Quantized blocks are validated
    // here once (finite f16 scales, strata/quant.hpp), so the kernels can decode without checks.
    for (const auto& [name, t] : model.tensors) {
        if (progress.cancel && progress.cancel->load()) throw Cancelled();
        const std::string what = (t.source_name.empty() ? name : t.source_name) + (t.file.empty() ? "" : " in " + t.file);
        if (!supported(t.dtype))
            throw UnsupportedError("not supported yet: " + std::string(dtype_name(t.dtype)) + " in " + what +
                                   " (CPU backend)");
        if (dtype_is_block(t.dtype)) {
            const int64_t n = t.numel();
            if (dtype_bytes(t.dtype, n) > t.nbytes || n % dtype_block_size(t.dtype) != 0)
                throw FormatError(what + ": " + std::to_string(t.nbytes) + " bytes do not hold " + std::to_string(n) +
                                  " " + std::string(dtype_name(t.dtype)) + " weights");
            const int64_t rows = t.shape.size() < 2 ? 1 : t.rows(), cols = t.cols();
            // &t = t: clang before 16 cannot capture a structured binding (the fuzz build uses clang 14).
            pool_.parallel_for(rows, 64, [&, &t = t](int64_t r0, int64_t r1) {
                try {
                    quant::validate(t.dtype, t.data + static_cast<uint64_t>(r0) * t.row_bytes(), (r1 - r0) * cols,
                                    what);
                } catch (const FormatError&) {
                    // Again row by row, so that the message names the row (blocks count from its start).
                    for (int64_t r = r0; r < r1; ++r)
                        quant::validate(t.dtype, t.data + static_cast<uint64_t>(r) * t.row_bytes(), cols,
                                        what + " row " + std::to_string(r));
                    throw;
                }
            });
        }
        bytes += t.nbytes;
        ++done;
        if (progress.on_progress) progress.on_progress(bytes, total_bytes, done, total);
    }
    make_resident(model, progress.cancel);
    freqs_ = rope_frequencies(model.config, model.rope_freqs_factors);
    model_ = &model;
}

void CpuBackend::make_resident(const Model& model, const std::atomic<bool>* cancel) {
    resident_.clear();
    groups_.clear();
    grouped_bytes_ = 0;
    resident_memory_ = HugePageBuffer();
    // STRATA_CPU_HUGE_PAGES=0: never (comparisons); =1: at any size, exact or not (tests); unset: on the fast
    // path from 64 MiB of matrices. The exact path (the explorer, forward, patch, attribute) reads the weights
    // where they are mapped: it loads at once and its passes are prompts, bound by arithmetic, not decode.
    const char* e = std::getenv("STRATA_CPU_HUGE_PAGES");
    const std::string mode = e ? e : "";
    if (mode == "0" || (exact_ && mode != "1")) return;
    // The output table (tok_embeddings when tied); a model made for a test may have neither.
    const auto out = model.tensors.find(model.config.tie_embeddings ? "tok_embeddings" : "output");
    const TensorView* output = out == model.tensors.end() ? nullptr : &out->second;
    std::vector<const TensorView*> matrices;
    std::unordered_set<const std::byte*> seen;  // one copy of bytes that two names share
    uint64_t bytes = 0;
    constexpr uint64_t kAlign = 64;
    for (const auto& [name, t] : model.tensors) {
        const bool product = t.shape.size() == 2 && (name != "tok_embeddings" || &t == output);
        if (!product || !t.data || t.nbytes == 0 || !seen.insert(t.data).second) continue;
        matrices.push_back(&t);
        bytes += (t.nbytes + kAlign - 1) / kAlign * kAlign;
    }
    // Only for weights that decode streams from memory (a small model sits in the caches: a 2 MiB page and its
    // copy would buy nothing), and with room to spare: the copy is the model's size again in memory of its own
    // (the mapped file's pages, counted as available, become reclaimable cache once copied), and the pass and
    // everything else on the machine still need some: an eighth of what is available, at least 2 GiB, is left.
    const uint64_t available = host_memory_available();
    const uint64_t reserve = std::max<uint64_t>(2ull << 30, available / 8);
    if ((bytes < (64ull << 20) && mode != "1") || bytes + reserve > available) return;
    HugePageBuffer memory(bytes);
    if (memory.size() == 0) return;
    uint64_t at = 0;
    for (const TensorView* t : matrices) {
        if (cancel && cancel->load()) {
            resident_.clear();
            groups_.clear();
            grouped_bytes_ = 0;
            throw Cancelled();
        }
        std::byte* dst = memory.data() + at;
        // In parallel pieces: the first touch of each page (and its huge-page fault) spreads over the threads.
        // Rows that decode reads faster in groups (quant::decode_group: ffn_down's wide K-type rows on x86)
        // are stored so, a piece of whole groups at a time; only the fast path's products read this copy.
        const int group = exact_ || t->rope_heads != 0 || dtype_bytes(t->dtype, t->numel()) != t->nbytes
                              ? 1
                              : quant::decode_group(t->dtype, t->cols(), int_isa(t->dtype, 1));
        const auto n = static_cast<int64_t>(t->nbytes);
        if (group > 1 && t->rows() % group == 0) {
            const uint64_t group_bytes = group * t->row_bytes();
            pool_.parallel_for(t->rows() / group, 1, [&](int64_t g0, int64_t g1) {
                quant::interleave_rows(t->dtype, t->data + g0 * group_bytes, (g1 - g0) * group, t->cols(), group,
                                       dst + g0 * group_bytes);
            });
            groups_.emplace(dst, group);
            grouped_bytes_ += t->nbytes;
        } else {
            pool_.parallel_for((n + (1 << 20) - 1) >> 20, 1, [&](int64_t c0, int64_t c1) {
                const int64_t b0 = c0 << 20, b1 = std::min(n, c1 << 20);
                std::memcpy(dst + b0, t->data + b0, static_cast<size_t>(b1 - b0));
            });
        }
        TensorView copy = *t;
        copy.data = dst;
        resident_.emplace(t->data, std::move(copy));
        at += (t->nbytes + kAlign - 1) / kAlign * kAlign;
    }
    resident_memory_ = std::move(memory);
}

const ModelConfig& CpuBackend::config(const char* op) const {
    if (!model_) throw Error(std::string("cpu backend: ") + op + " before load()");
    return model_->config;
}

uint64_t CpuBackend::memory_available() const { return host_memory_available(); }

Buf CpuBackend::alloc(int64_t n, std::string_view debug_name) {
    if (n < 0) throw Error("cpu backend: negative size for buffer " + std::string(debug_name));
    // Zero-filling touches every page: a buffer larger than the free memory would bring in the OOM killer.
    const uint64_t bytes = static_cast<uint64_t>(n) * 4, free_bytes = memory_available();
    if (bytes > free_bytes)
        throw InputError("cpu backend: buffer '" + std::string(debug_name) + "' needs " + format_bytes(bytes) +
                         " but only " + format_bytes(free_bytes) + " of memory is available");
    uint32_t id;
    if (!free_ids_.empty()) {
        id = free_ids_.back();
        free_ids_.pop_back();
    } else {
        id = static_cast<uint32_t>(buffers_.size());
        buffers_.emplace_back();
        live_.push_back(false);
    }
    buffers_[id].assign(static_cast<size_t>(n), 0.0f);
    live_[id] = true;
    return Buf{id, 0, n};
}

void CpuBackend::free(Buf b) {
    if (!b.valid() || b.id >= buffers_.size() || !live_[b.id]) return;
    CacheLineVector<float>().swap(buffers_[b.id]);
    live_[b.id] = false;
    free_ids_.push_back(b.id);
}

void CpuBackend::begin() { results_.clear(); }

float* CpuBackend::span_of(Buf b, int64_t n, const char* op) {
    if (!b.valid() || b.id >= buffers_.size() || !live_[b.id])
        throw Error(std::string("cpu backend: ") + op + ": invalid buffer");
    const auto size = static_cast<int64_t>(buffers_[b.id].size());
    if (b.offset < 0 || n < 0 || b.offset + n > size)
        throw Error(std::string("cpu backend: ") + op + ": range [" + std::to_string(b.offset) + ", " +
                    std::to_string(b.offset + n) + ") outside a buffer of " + std::to_string(size) + " floats");
    return buffers_[b.id].data() + b.offset;
}

void CpuBackend::embed(Buf out, std::span<const int32_t> tokens) {
    const ModelConfig& c = config("embed");
    const TensorView& tok_embeddings = model_->tensor("tok_embeddings");  // [vocab, dim]
    const auto T = static_cast<int64_t>(tokens.size());
    float* o = span_of(out, T * c.dim, "embed");  // [T, dim]
    for (int64_t t = 0; t < T; ++t) {
        const int32_t id = tokens[static_cast<size_t>(t)];
        if (id < 0 || id >= tok_embeddings.rows())
            throw InputError("token id " + std::to_string(id) + " at position " + std::to_string(t) +
                             " is outside the vocabulary (0.." + std::to_string(tok_embeddings.rows() - 1) + ")");
        widen_row(tok_embeddings, id, o + t * c.dim, float_isa_);
    }
}

void CpuBackend::rmsnorm(Buf out, Buf x, const TensorView& weight, int64_t T, float eps) {
    const int64_t n = weight.numel();
    float* o = span_of(out, T * n, "rmsnorm");        // [T, n]
    const float* xs = span_of(x, T * n, "rmsnorm");   // [T, n]
    std::vector<float> g(static_cast<size_t>(n));     // [n] the gain, widened once
    widen_row(weight, 0, g.data(), float_isa_);
    pool_.parallel_for(T, 1, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
            const float* row = xs + t * n;
            double ss = 0;
            for (int64_t i = 0; i < n; ++i) ss += double(row[i]) * row[i];
            // model.py: x * rsqrt(mean(x^2) + eps), then times the gain.
            const float inv = static_cast<float>(1.0 / std::sqrt(ss / double(n) + double(eps)));
            for (int64_t i = 0; i < n; ++i) o[t * n + i] = (row[i] * inv) * g[i];
        }
    });
}

CpuBackend::Path CpuBackend::path_of(const TensorView& w, int64_t T) const {
    if (!exact_ && quant::has_integer_dot(w.dtype)) return Path::IntegerDot;
    if (!exact_ && T == 1 && w.dtype == DType::F16) return Path::HalfX;
    return T == 1 ? Path::Matvec : Path::Tiles;
}

CpuBackend::Path CpuBackend::prepare(Path p, const float* xs, int64_t T, int64_t cols) {
    if (p == Path::IntegerDot) quant::quantize_activations(xs, T * cols, act_, isa_);  // all T rows at once
    if (p == Path::HalfX) {
        xh_scale_ = half_activations(xs, cols, xh_, float_isa_);
        if (xh_scale_ <= 0) return Path::Matvec;  // Inf or NaN in x, or no binary16 kernel: the exact product
    }
    return p;
}

void CpuBackend::product_rows(Path p, const TensorView& w, const float* xs, int64_t T, float* out, int64_t r0,
                              int64_t r1) {
    switch (p) {
        case Path::IntegerDot: {
            const auto g = groups_.find(w.data);
            return matmul_q8_rows(w, act_, T, out, r0, r1, int_isa(w.dtype, T), g == groups_.end() ? 1 : g->second);
        }
        case Path::HalfX: return matvec_f16_h(w, xh_.data(), xh_scale_, out, r0, r1, float_isa_);
        case Path::Matvec: return matvec(w, xs, out, r0, r1, float_isa_);  // decode: one pass over the weights
        case Path::Tiles: break;
    }
    throw Error("cpu backend: " + w.name + ": the prefill tiles run through matmul only");
}

void CpuBackend::matmul(Buf out, Buf x, const TensorView& mapped, int64_t T) {
    const TensorView& w = resident(mapped, T);
    const int64_t rows = w.rows(), cols = w.cols();
    float* o = span_of(out, T * rows, "matmul");       // [T, rows]
    const float* xs = span_of(x, T * cols, "matmul");  // [T, cols]
    check_not_input(out, x, w);
    if (const Path p = prepare(path_of(w, T), xs, T, cols); p != Path::Tiles) {
        pool_.parallel_for(rows, kRowGrain, [&](int64_t r0, int64_t r1) { product_rows(p, w, xs, T, o, r0, r1); });
        return;
    }
    // Prefill: each block of rows is widened once and used for every token.
    pool_.parallel_for(rows, kRowBlock, [&](int64_t r0, int64_t r1) {
        thread_local CacheLineVector<float> scratch;  // [kRowBlock, cols]
        scratch.resize(static_cast<size_t>(kRowBlock * cols));
        matmul_rows(w, xs, T, o, r0, r1, scratch.data(), float_isa_);
    });
}

void CpuBackend::check_not_input(Buf out, Buf x, const TensorView& w) {
    if (out.id == x.id) throw Error("cpu backend: matmul output aliases its input (" + w.name + ")");
}

std::optional<CpuBackend::Path> CpuBackend::shared_path(std::initializer_list<const TensorView*> ws,
                                                         int64_t T) const {
    const TensorView& first = **ws.begin();
    const Path p = path_of(first, T);
    if (p == Path::Tiles) return std::nullopt;
    for (const TensorView* w : ws)
        if (path_of(*w, T) != p || w->cols() != first.cols() || w->rows() % kRowGrain != 0) return std::nullopt;
    return p;
}

void CpuBackend::matmul_qkv(Buf q_out, Buf k_out, Buf v_out, Buf x, const TensorView& wq, const TensorView& wk,
                            const TensorView& wv, int64_t T, int64_t n_heads, int64_t n_kv_heads, int64_t pos0) {
    const TensorView* w[3] = {&resident(wq, T), &resident(wk, T), &resident(wv, T)};
    const std::optional<Path> shared = shared_path({w[0], w[1], w[2]}, T);
    if (!shared) return Backend::matmul_qkv(q_out, k_out, v_out, x, wq, wk, wv, T, n_heads, n_kv_heads, pos0);
    const Buf outs[3] = {q_out, k_out, v_out};
    float* o[3];
    for (int i = 0; i < 3; ++i) {
        o[i] = span_of(outs[i], T * w[i]->rows(), "matmul_qkv");  // [T, rows of w[i]]
        check_not_input(outs[i], x, *w[i]);
    }
    const float* xs = span_of(x, T * w[0]->cols(), "matmul_qkv");  // [T, dim]
    const Path p = prepare(*shared, xs, T, w[0]->cols());
    // The three matrices' rows as one range, so the threads share one job (and x is prepared once).
    pool_.parallel_for(w[0]->rows() + w[1]->rows() + w[2]->rows(), kRowGrain, [&](int64_t g0, int64_t g1) {
        for (int64_t i = 0, base = 0; i < 3; base += w[i]->rows(), ++i) {
            const int64_t r0 = std::max<int64_t>(g0 - base, 0), r1 = std::min(g1 - base, w[i]->rows());
            if (r0 < r1) product_rows(p, *w[i], xs, T, o[i], r0, r1);
        }
    });
    rope(q_out, T, n_heads, pos0);
    rope(k_out, T, n_kv_heads, pos0);
}

void CpuBackend::matmul_swiglu(Buf out, Buf x, const TensorView& w1_mapped, const TensorView& w3_mapped, int64_t T,
                               Buf a_scratch, Buf b_scratch) {
    const TensorView &w1 = resident(w1_mapped, T), &w3 = resident(w3_mapped, T);
    const std::optional<Path> shared = shared_path({&w1, &w3}, T);
    if (!shared || w1.rows() != w3.rows())
        return Backend::matmul_swiglu(out, x, w1_mapped, w3_mapped, T, a_scratch, b_scratch);
    const int64_t hidden = w1.rows(), cols = w1.cols();
    float* o = span_of(out, T * hidden, "matmul_swiglu");        // [T, hidden]
    float* a = span_of(a_scratch, T * hidden, "matmul_swiglu");  // [T, hidden]
    float* g = span_of(b_scratch, T * hidden, "matmul_swiglu");  // [T, hidden]
    const float* xs = span_of(x, T * cols, "matmul_swiglu");     // [T, dim]
    check_not_input(a_scratch, x, w1);
    check_not_input(b_scratch, x, w3);
    const Path p = prepare(*shared, xs, T, cols);
    // Each range of rows of w1 and then the same rows of w3, and the gate of those rows: one job, x prepared once.
    pool_.parallel_for(hidden, kRowGrain, [&](int64_t r0, int64_t r1) {
        product_rows(p, w1, xs, T, a, r0, r1);
        product_rows(p, w3, xs, T, g, r0, r1);
        for (int64_t t = 0; t < T; ++t)
            for (int64_t r = r0; r < r1; ++r) o[t * hidden + r] = silu_gate(a[t * hidden + r], g[t * hidden + r]);
    });
}

void CpuBackend::rope(Buf x, int64_t T, int64_t n_heads, int64_t pos0) {
    const ModelConfig& c = config("rope");
    const int64_t head_dim = c.head_dim, half = head_dim / 2;
    float* xs = span_of(x, T * n_heads * head_dim, "rope");  // [T, n_heads * head_dim]
    pool_.parallel_for(T, 1, [&](int64_t t0, int64_t t1) {
        std::vector<double> cs(static_cast<size_t>(half)), sn(static_cast<size_t>(half));  // [head_dim/2]
        for (int64_t t = t0; t < t1; ++t) {
            // The angle in double: at positions in the thousands a float angle would lose the low bits
            // that the high-frequency pairs depend on.
            const double pos = static_cast<double>(pos0 + t);
            for (int64_t i = 0; i < half; ++i) {
                const double angle = pos * freqs_[static_cast<size_t>(i)];
                cs[static_cast<size_t>(i)] = std::cos(angle);
                sn[static_cast<size_t>(i)] = std::sin(angle);
            }
            for (int64_t h = 0; h < n_heads; ++h) {
                float* v = xs + (t * n_heads + h) * head_dim;  // [head_dim] pairs (re, im), Meta layout
                for (int64_t i = 0; i < half; ++i) {
                    const double re = v[2 * i], im = v[2 * i + 1];
                    const double c0 = cs[static_cast<size_t>(i)], s0 = sn[static_cast<size_t>(i)];
                    v[2 * i] = static_cast<float>(re * c0 - im * s0);
                    v[2 * i + 1] = static_cast<float>(re * s0 + im * c0);
                }
            }
        }
    });
}

void CpuBackend::attention(Buf out, Buf q, Buf k_cache, Buf v_cache, int64_t T, int64_t pos0, Buf probs) {
    const int64_t L = pos0 + T, kv_dim = config("attention").kv_dim();
    attend(out, q, {span_of(k_cache, L * kv_dim, "attention"), nullptr, kv_dim},
           {span_of(v_cache, L * kv_dim, "attention"), nullptr, kv_dim}, T, pos0, probs);
}

void CpuBackend::store_f16(Buf dst, Buf src, int64_t n) {
    if (n % 2 != 0) throw Error("cpu backend: store_f16 of an odd count " + std::to_string(n));
    auto* d = reinterpret_cast<uint32_t*>(span_of(dst, n / 2, "store_f16"));  // the buffer's words, as bits
    const float* s = span_of(src, n, "store_f16");
    for (int64_t i = 0; i < n / 2; ++i)
        d[i] = uint32_t(f32_to_f16_saturating(s[2 * i])) | uint32_t(f32_to_f16_saturating(s[2 * i + 1])) << 16;
}

void CpuBackend::attention_f16(Buf out, Buf q, Buf k_cache, Buf v_cache, int64_t T, int64_t pos0, Buf probs) {
    // The same attention, each key and value row widened exactly as it is read (into a row of scratch in L1, by
    // vcvtph2ps where the CPU has F16C), so the result is what a float32 cache holding the binary16 values gives,
    // bit for bit, while half the bytes come from memory. (The first version widened the cache's first L rows
    // into float32 scratch per layer and step: the 1B model's decode after 2048 tokens ~20% slower than with a
    // float32 cache.)
    const int64_t kv_dim = config("attention").kv_dim(), n = (pos0 + T) * kv_dim;
    // Little-endian words: element 2i is the low half, so the words read as consecutive halves.
    auto halves = [&](Buf cache) {
        return KvHead{nullptr, reinterpret_cast<const uint16_t*>(span_of(cache, n / 2, "attention_f16")), kv_dim};
    };
    attend(out, q, halves(k_cache), halves(v_cache), T, pos0, probs);
}

void CpuBackend::attend(Buf out, Buf q, const KvHead& keys, const KvHead& values, int64_t T, int64_t pos0,
                        Buf probs) {
    const ModelConfig& c = config("attention");
    const int64_t head_dim = c.head_dim, n_heads = c.n_heads, n_rep = c.n_rep();
    const int64_t q_dim = c.q_dim(), L = pos0 + T;
    float* o = span_of(out, T * q_dim, "attention");          // [T, n_heads * head_dim]
    const float* xq = span_of(q, T * q_dim, "attention");     // [T, n_heads * head_dim]
    // keys, values: [pos0 + T, n_kv_heads * head_dim]
    float* p_out = probs.valid() ? span_of(probs, n_heads * T * L, "attention") : nullptr;  // [n_heads, T, L]
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
    // Work items: (kv head, tile of up to kAttendTokens queries, part of the kv head's n_rep query heads), the
    // query heads of a kv head and a prompt's neighbouring tokens together so that each block of key and value
    // rows read serves all of them; split into parts only where the kv heads alone would leave threads idle
    // (decode on many cores). Each head's result is the same whatever the tile and the split.
    const int64_t tiles = (T + kAttendTokens - 1) / kAttendTokens, groups = c.n_kv_heads * tiles;
    const int64_t wanted = std::clamp<int64_t>((2 * pool_.size() + groups - 1) / groups, 1, n_rep);
    const int64_t per_part = (n_rep + wanted - 1) / wanted, parts = (n_rep + per_part - 1) / per_part;
    pool_.parallel_for(groups * parts, 1, [&](int64_t i0, int64_t i1) {
        thread_local std::vector<float> scores;  // [Qn, G, pos0 + t0 + Qn] where the probabilities are not kept
        for (int64_t item = i0; item < i1; ++item) {
            const int64_t part = item % parts, tile = item / parts % tiles, kv_h = item / (parts * tiles);
            const int64_t g0 = part * per_part, G = std::min(n_rep, g0 + per_part) - g0;  // G >= 1
            const int64_t t0 = tile * kAttendTokens, Qn = std::min(kAttendTokens, T - t0);
            const int64_t h0 = kv_h * n_rep + g0;  // the first query head of the item
            const int64_t at = kv_h * head_dim;    // the kv head's columns in a cache row
            const int64_t qo = t0 * q_dim + h0 * head_dim;  // query (i, g) at qo + i * q_dim + g * head_dim
            cpu::QueryTile qt{xq + qo, o + qo, q_dim, head_dim, nullptr, 0, 0, Qn, G, head_dim, pos0 + t0 + 1};
            if (p_out) {
                qt.probs = p_out + (h0 * T + t0) * L;  // rows [h0 + g, t0 + i] of [n_heads, T, L]
                qt.p_tok = L, qt.p_head = T * L;
            } else {
                const int64_t n_max = pos0 + t0 + Qn;  // the tile's last query's keys
                scores.resize(static_cast<size_t>(Qn * G * n_max));
                qt.probs = scores.data(), qt.p_tok = G * n_max, qt.p_head = n_max;
            }
            cpu::attend_heads(qt, keys.columns(at), values.columns(at), scale, float_isa_);
            if (p_out)
                for (int64_t i = 0; i < Qn; ++i)
                    for (int64_t g = 0; g < G; ++g) {
                        float* row = qt.probs + i * qt.p_tok + g * qt.p_head;
                        std::fill(row + pos0 + t0 + i + 1, row + L, 0.0f);
                    }
        }
    });
}

void CpuBackend::swiglu(Buf out, Buf a, Buf b, int64_t n) {
    float* o = span_of(out, n, "swiglu");
    const float* as = span_of(a, n, "swiglu");
    const float* bs = span_of(b, n, "swiglu");
    pool_.parallel_for(n, 4096, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) o[i] = silu_gate(as[i], bs[i]);
    });
}

void CpuBackend::add(Buf out, Buf a, Buf b, int64_t n) {
    float* o = span_of(out, n, "add");
    const float* as = span_of(a, n, "add");
    const float* bs = span_of(b, n, "add");
    for (int64_t i = 0; i < n; ++i) o[i] = as[i] + bs[i];
}

void CpuBackend::copy(Buf dst, Buf src, int64_t n) {
    float* d = span_of(dst, n, "copy");
    const float* s = span_of(src, n, "copy");
    std::memmove(d, s, static_cast<size_t>(n) * sizeof(float));
}

Readback CpuBackend::topk(Buf row, int64_t n, int64_t k) {
    const float* xs = span_of(row, n, "topk");  // [n]
    k = std::clamp<int64_t>(k, 0, n);
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                      [&](int32_t a, int32_t b) { return ranks_before(xs[a], a, xs[b], b); });
    Result r;
    r.is_topk = true;
    for (int64_t i = 0; i < k; ++i) {
        const int32_t id = ids[static_cast<size_t>(i)];
        r.top.push_back(TokenScore{id, xs[id]});
    }
    results_.push_back(std::move(r));
    return Readback{static_cast<uint32_t>(results_.size() - 1)};
}

Readback CpuBackend::readback(Buf src, int64_t n) {
    const float* s = span_of(src, n, "readback");
    Result r;
    r.data.assign(s, s + n);
    results_.push_back(std::move(r));
    return Readback{static_cast<uint32_t>(results_.size() - 1)};
}

void CpuBackend::write(Buf dst, std::span<const float> src) {
    float* d = span_of(dst, static_cast<int64_t>(src.size()), "write");
    std::copy(src.begin(), src.end(), d);
}

std::vector<float> CpuBackend::fetch(Readback r) {
    if (r.id >= results_.size() || results_[r.id].is_topk) throw Error("cpu backend: fetch of an unknown readback");
    return results_[r.id].data;
}

std::vector<TokenScore> CpuBackend::topk_result(Readback r) {
    if (r.id >= results_.size() || !results_[r.id].is_topk)
        throw Error("cpu backend: topk_result of an unknown top-k");
    return results_[r.id].top;
}

}  // namespace strata::cpu
