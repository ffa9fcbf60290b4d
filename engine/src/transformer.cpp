// The forward pass of Llama 3, written once over the Backend ops. Read it beside meta-llama/llama3
// llama/model.py: Transformer.forward, TransformerBlock.forward, Attention.forward and FeedForward.forward
// each have their own function below, in the same order and with the same names.
#include "strata/transformer.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "strata/error.hpp"
#include "strata/host_memory.hpp"
#include "strata/quant.hpp"

namespace strata {

// ---------------------------------------------------------------------------------------------- KV cache

std::string_view kv_cache_type_name(KvCacheType t) { return t == KvCacheType::F16 ? "f16" : "f32"; }

uint64_t kv_cache_bytes(const ModelConfig& config, int64_t max_seq, KvCacheType type) {
    const long double value = type == KvCacheType::F16 ? 2.0L : 4.0L;
    const long double b = 2.0L * double(config.n_layers) * double(max_seq) * double(config.kv_dim()) * value;
    return b >= 1.8e19L ? UINT64_MAX : static_cast<uint64_t>(b);
}

namespace {
// Logits rows a step holds at once on the backend.
int64_t held_logits_rows(const TraceRequest& request, int64_t T) {
    const int64_t logits_rows = request.logits_all_positions ? T : 1;
    return request.wants("logits") ? logits_rows : std::min(logits_rows, kLogitRowsPerPiece);
}
}  // namespace

uint64_t step_buffer_bytes(const ModelConfig& c, const TraceRequest& request, int64_t T, int64_t pos0) {
    // As StepBuffers::reserve allocates them: x, xn, attention_out, ffn_out of dim; xq, attention of q_dim; w1, w3
    // and ffn_hidden of hidden_dim; the logits rows; the probabilities.
    const long double per_token = 4.0L * double(c.dim) + 2.0L * double(c.q_dim()) + 3.0L * double(c.hidden_dim);
    const long double probs = request.attention_probs ? double(c.n_heads) * double(T) * double(pos0 + T) : 0.0L;
    const long double b = 4.0L * (per_token * double(T) + double(held_logits_rows(request, T)) * double(c.vocab_size) + probs);
    return b >= 1.8e19L ? UINT64_MAX : static_cast<uint64_t>(b);
}

KVCache::KVCache(Backend& backend, const ModelConfig& config, int64_t max_seq, KvCacheType type)
    : backend_(&backend), max_seq_(max_seq), type_(type),
      row_(type == KvCacheType::F16 ? config.kv_dim() / 2 : config.kv_dim()) {
    if (max_seq <= 0) throw InputError("KV cache: the context must hold at least one token");
    if (type == KvCacheType::F16 && config.kv_dim() % 2 != 0)
        throw UnsupportedError("a binary16 KV cache needs an even n_kv_heads * head_dim, not " +
                               std::to_string(config.kv_dim()));
    // Refused before anything is allocated, with what it needs and what to change.
    const uint64_t need = kv_cache_bytes(config, max_seq, type), free_bytes = backend.memory_available();
    if (need > free_bytes)
        throw InputError("a context of " + std::to_string(max_seq) + " tokens needs a KV cache of " + format_bytes(need) +
                         " (2 x " + std::to_string(config.n_layers) + " layers x " + std::to_string(max_seq) + " x " +
                         std::to_string(config.kv_dim()) + (type == KvCacheType::F16 ? " binary16" : " float32") +
                         "), more than the " + format_bytes(free_bytes) +
                         " the " + backend.info().backend + " backend has available: choose a shorter context (at most "
                         "about " + std::to_string(static_cast<int64_t>(double(max_seq) * double(free_bytes) / double(need))) + " tokens)");
    if (type == KvCacheType::F16) backend.prepare_f16_kv();
    for (int64_t l = 0; l < config.n_layers; ++l) {
        k_.push_back(backend.alloc(max_seq * row_, "cache_k"));  // [max_seq, n_kv_heads * head_dim]
        v_.push_back(backend.alloc(max_seq * row_, "cache_v"));  // [max_seq, n_kv_heads * head_dim]
    }
}

KVCache::~KVCache() {
    for (Buf b : k_) backend_->free(b);
    for (Buf b : v_) backend_->free(b);
}

void KVCache::truncate(int64_t n) {
    // Rows past n stay in memory and are overwritten by the next tokens; attention never reads past size().
    if (n < 0) n = 0;
    if (n < size_) size_ = n;
}

// ---------------------------------------------------------------------------------------------- scratch

namespace {

// Every weight of one TransformerBlock, looked up once.
struct LayerWeights {
    const TensorView* attention_norm;  // [dim]
    const TensorView* wq;              // [n_heads * head_dim, dim]
    const TensorView* wk;              // [n_kv_heads * head_dim, dim]
    const TensorView* wv;              // [n_kv_heads * head_dim, dim]
    const TensorView* wo;              // [dim, n_heads * head_dim]
    const TensorView* ffn_norm;        // [dim]
    const TensorView* w1;              // [hidden_dim, dim]
    const TensorView* w2;              // [dim, hidden_dim]
    const TensorView* w3;              // [hidden_dim, dim]
};

// Activation buffers on the backend, kept between steps so that decode allocates nothing.
struct StepBuffers {
    int64_t T_cap = 0, logits_rows_cap = 0, probs_cap = 0;
    Buf x;           // [T, dim] the residual stream: x, then h, then the block's output
    Buf xn;          // [T, dim] attention_norm(x) / ffn_norm(h) / norm(h)
    Buf xq;          // [T, n_heads * head_dim]
    Buf attn;        // [T, n_heads * head_dim] attention output before wo
    Buf attn_out;    // [T, dim]
    Buf ffn_a;       // [T, hidden_dim] w1(x)
    Buf ffn_b;       // [T, hidden_dim] w3(x)
    Buf ffn_hidden;  // [T, hidden_dim] silu(w1(x)) * w3(x)
    Buf ffn_out;     // [T, dim]
    Buf logits;      // [rows, vocab]
    Buf probs;       // [n_heads * T, pos0 + T] (on request)
    // Transformer::project's own rows (the lens), apart from the step's so that a lens leaves a step's trace alone.
    int64_t lens_rows_cap = 0;
    Buf lens_h, lens_hn;  // [rows, dim]
    Buf lens_logits;      // [rows, vocab]

    void release(Backend& b) {
        for (Buf* p : {&x, &xn, &xq, &attn, &attn_out, &ffn_a, &ffn_b, &ffn_hidden, &ffn_out, &logits, &probs, &lens_h,
                       &lens_hn, &lens_logits})
            if (p->valid()) b.free(*p), *p = Buf{};
        T_cap = logits_rows_cap = probs_cap = lens_rows_cap = 0;
    }

    // Grows the lens buffers to `rows`; kept, so that a lens over many chunks allocates once.
    void reserve_lens(Backend& b, const ModelConfig& c, int64_t rows) {
        if (rows <= lens_rows_cap) return;
        for (Buf* p : {&lens_h, &lens_hn, &lens_logits})
            if (p->valid()) b.free(*p), *p = Buf{};
        lens_h = b.alloc(rows * c.dim, "lens h");
        lens_hn = b.alloc(rows * c.dim, "lens norm");
        lens_logits = b.alloc(rows * c.vocab_size, "lens logits");
        lens_rows_cap = rows;
    }

    // Grows the buffers to hold T tokens; they are kept between steps so that decode allocates nothing.
    void reserve(Backend& b, const ModelConfig& c, int64_t T, int64_t logits_rows, int64_t probs_n) {
        if (T > T_cap) {
            for (Buf* p : {&x, &xn, &xq, &attn, &attn_out, &ffn_a, &ffn_b, &ffn_hidden, &ffn_out})
                if (p->valid()) b.free(*p), *p = Buf{};
            x = b.alloc(T * c.dim, "x");
            xn = b.alloc(T * c.dim, "xn");
            xq = b.alloc(T * c.q_dim(), "xq");
            attn = b.alloc(T * c.q_dim(), "attention");
            attn_out = b.alloc(T * c.dim, "attention_out");
            ffn_a = b.alloc(T * c.hidden_dim, "ffn_w1");
            ffn_b = b.alloc(T * c.hidden_dim, "ffn_w3");
            ffn_hidden = b.alloc(T * c.hidden_dim, "ffn_hidden");
            ffn_out = b.alloc(T * c.dim, "ffn_out");
            T_cap = T;
        }
        if (logits_rows > logits_rows_cap) {
            if (logits.valid()) b.free(logits);
            logits = b.alloc(logits_rows * c.vocab_size, "logits");
            logits_rows_cap = logits_rows;
        }
        if (probs_n > probs_cap) {
            if (probs.valid()) b.free(probs);
            probs = b.alloc(probs_n, "attention.probs");
            probs_cap = probs_n;
        }
    }
};

}  // namespace

struct Transformer::Scratch {
    std::vector<LayerWeights> layers;
    const TensorView* norm = nullptr;    // [dim]
    const TensorView* output = nullptr;  // [vocab, dim] (tok_embeddings when tied)
    StepBuffers bufs;
};

namespace {

// Collects what the request keeps. Readbacks are recorded beside the ops and fetched after each submit.
// A traced site is also where interventions act: site() first makes the requested changes to the tensor, then
// keeps it, so the trace shows the intervened pass and reading and changing are one mechanism.
class Captures {
public:
    Captures(Backend& b, const TraceRequest& r, Trace& t, int64_t pos0) : b_(b), request_(r), trace_(t), pos0_(pos0) {}

    bool wants(const std::string& name) const { return request_.wants(name); }
    // Whether the pass must materialise the tensor at `name`: kept, or changed by an intervention.
    bool touches(const std::string& name) const { return request_.wants(name) || changes(name); }
    bool changes(const std::string& name) const {
        return std::any_of(request_.interventions.begin(), request_.interventions.end(),
                           [&](const Intervention& iv) { return iv.site == name; });
    }
    // src: [rows, cols], rows at positions pos0.. of this step.
    void site(const std::string& name, Buf src, int64_t rows, int64_t cols) {
        if (!request_.interventions.empty()) intervene(name, src, rows, cols);
        keep(name, src, rows, cols);
    }
    void keep(const std::string& name, Buf src, int64_t rows, int64_t cols) {
        if (!request_.wants(name)) return;
        pending_.push_back({name, rows, cols, b_.readback(src, rows * cols)});
    }
    void keep_top_k(Buf row, int64_t n, int64_t k) { pending_top_.push_back(b_.topk(row, n, k)); }
    void keep_last_logits(Buf row, int64_t n) { last_ = b_.readback(row, n), has_last_ = true; }
    // rows [n, vocab], rows row0.. of the step's logits, for request.on_logits.
    void logits_piece(Buf rows, int64_t row0, int64_t n, int64_t vocab) {
        if (request_.on_logits) pending_pieces_.push_back({row0, b_.readback(rows, n * vocab)});
    }

    // After submit(): move the results into the trace.
    void collect() {
        for (auto& p : pending_) {
            TracedTensor t{p.name, p.rows, p.cols, b_.fetch(p.rb)};
            trace_.tensors[p.name] = std::move(t);
        }
        for (Readback rb : pending_top_) trace_.top_k.push_back(b_.topk_result(rb));
        if (has_last_) trace_.last_logits = b_.fetch(last_);
        for (const Piece& p : pending_pieces_) request_.on_logits(p.row0, b_.fetch(p.rb));
        pending_.clear();
        pending_top_.clear();
        pending_pieces_.clear();
        has_last_ = false;
    }

private:
    // Writes the interventions at `name` into src, recorded in order with the ops around them.
    void intervene(const std::string& name, Buf src, int64_t rows, int64_t cols) {
        for (const Intervention& iv : request_.interventions) {
            if (iv.site != name) continue;
            const int64_t n = iv.cols < 0 ? cols - iv.col0 : iv.cols;
            if (iv.position >= 0) {
                const int64_t t = iv.position - pos0_;
                if (t < 0 || t >= rows) continue;  // not a position of this step
                write_row(src, t * cols + iv.col0, n, iv.values);
            } else if (iv.values.empty() && n == cols) {
                write_row(src, 0, rows * cols, {});  // whole rows at every position: one contiguous write
            } else {
                for (int64_t t = 0; t < rows; ++t) write_row(src, t * cols + iv.col0, n, iv.values);
            }
        }
    }
    void write_row(Buf dst, int64_t offset, int64_t n, const std::vector<float>& values) {
        if (values.empty()) {
            if (static_cast<int64_t>(zeros_.size()) < n) zeros_.assign(static_cast<size_t>(n), 0.0f);
            b_.write(dst.at(offset, n), std::span<const float>(zeros_.data(), static_cast<size_t>(n)));
        } else {
            b_.write(dst.at(offset, n), values);
        }
    }

    struct Pending {
        std::string name;
        int64_t rows, cols;
        Readback rb;
    };
    struct Piece {
        int64_t row0;
        Readback rb;
    };
    Backend& b_;
    const TraceRequest& request_;
    Trace& trace_;
    std::vector<Pending> pending_;
    std::vector<Readback> pending_top_;
    std::vector<Piece> pending_pieces_;
    Readback last_;
    bool has_last_ = false;
    int64_t pos0_ = 0;
    std::vector<float> zeros_;
};

// One forward step over T tokens at positions pos0..pos0+T-1: the state model.py keeps in locals.
struct Pass {
    Backend& b;
    const ModelConfig& c;
    StepBuffers& s;
    KVCache& cache;
    Captures& cap;
    int64_t T, pos0;
    bool want_probs;
    bool normed = false;  // xn holds the next norm of the residual stream already (Backend::matmul_add_rmsnorm)

    std::string name(int64_t layer, const char* what) const { return "layers." + std::to_string(layer) + "." + what; }

    // Attention.forward: xq, xk, xv = wq(x), wk(x), wv(x); rotary embedding on xq, xk; the new keys and values
    // go into the cache; scores = softmax(xq @ keys^T / sqrt(head_dim) + mask); output = wo(scores @ values).
    // With `residual` valid, wo's product is added into it (matmul_add) and `out` is only its scratch; with
    // `norm` too, norm(residual) goes into norm_out (matmul_add_rmsnorm).
    void attention(int64_t layer, const LayerWeights& w, Buf x /* [T, dim] */, Buf out /* [T, dim] */,
                   Buf residual = {}, const TensorView* norm = nullptr, Buf norm_out = {}) {
        const int64_t kv_dim = c.kv_dim(), q_dim = c.q_dim();
        Buf xq = s.xq.at(0, T * q_dim);                                   // [T, n_heads * head_dim]
        // The new keys and values: the cache's rows themselves, or (binary16 cache) rounded into it as they are
        // computed (Backend::matmul_store_f16), through the feed-forward's scratch when the trace keeps them.
        const bool f16 = cache.type() == KvCacheType::F16;
        const bool f16_direct = f16 && !cap.touches(name(layer, "k")) && !cap.touches(name(layer, "v"));
        Buf xk = f16 ? s.ffn_a.at(0, T * kv_dim) : cache.k_rows(layer, pos0, T);  // [T, n_kv_heads * head_dim]
        Buf xv = f16 ? s.ffn_b.at(0, T * kv_dim) : cache.v_rows(layer, pos0, T);  // [T, n_kv_heads * head_dim]
        // RoPE goes into the q and k products (Backend::matmul_rope): nothing reads them before the rotation.
        if (f16_direct) {
            b.matmul_qkv_f16(xq, cache.k_rows(layer, pos0, T), cache.v_rows(layer, pos0, T), x, *w.wq, *w.wk, *w.wv,
                             T, c.n_heads, c.n_kv_heads, pos0, xk, xv);
        } else {
            // The three products of x as one op (Backend::matmul_qkv: one dispatch on Vulkan).
            b.matmul_qkv(xq, xk, xv, x, *w.wq, *w.wk, *w.wv, T, c.n_heads, c.n_kv_heads, pos0);
        }
        cap.keep(name(layer, "q"), xq, T, q_dim);
        cap.keep(name(layer, "k"), xk, T, kv_dim);
        cap.keep(name(layer, "v"), xv, T, kv_dim);
        if (f16 && !f16_direct) {
            b.store_f16(cache.k_rows(layer, pos0, T), xk, T * kv_dim);
            b.store_f16(cache.v_rows(layer, pos0, T), xv, T * kv_dim);
        }

        const int64_t L = pos0 + T;
        Buf keys = cache.k_rows(layer, 0, L);    // [pos0 + T, n_kv_heads * head_dim]
        Buf values = cache.v_rows(layer, 0, L);  // [pos0 + T, n_kv_heads * head_dim]
        Buf scores = want_probs ? s.probs.at(0, c.n_heads * T * L) : Buf{};  // [n_heads * T, pos0 + T]
        Buf output = s.attn.at(0, T * q_dim);                                 // [T, n_heads * head_dim]
        if (f16) b.attention_f16(output, xq, keys, values, T, pos0, scores);
        else b.attention(output, xq, keys, values, T, pos0, scores);
        if (want_probs) cap.keep(name(layer, "attention.probs"), scores, c.n_heads * T, L);
        cap.site(name(layer, "attention.heads"), output, T, q_dim);
        if (norm) b.matmul_add_rmsnorm(residual, output, *w.wo, T, out, norm_out, *norm, c.norm_eps);
        else if (residual.valid()) b.matmul_add(residual, output, *w.wo, T, out);
        else b.matmul(out, output, *w.wo, T);
    }

    // FeedForward.forward: w2(silu(w1(x)) * w3(x)). w1 and w3 with the gate are one op (Backend::matmul_swiglu):
    // nothing reads their products on their own; a and g are its scratch where a backend does not fuse it.
    // `residual`, `norm` and `norm_out` as attention's.
    void feed_forward(int64_t layer, const LayerWeights& w, Buf x /* [T, dim] */, Buf out /* [T, dim] */,
                      Buf residual = {}, const TensorView* norm = nullptr, Buf norm_out = {}) {
        const int64_t hd = c.hidden_dim;
        Buf a = s.ffn_a.at(0, T * hd);              // [T, hidden_dim]
        Buf g = s.ffn_b.at(0, T * hd);              // [T, hidden_dim]
        Buf hidden = s.ffn_hidden.at(0, T * hd);    // [T, hidden_dim]
        b.matmul_swiglu(hidden, x, *w.w1, *w.w3, T, a, g);
        cap.site(name(layer, "ffn_hidden"), hidden, T, hd);
        if (norm) b.matmul_add_rmsnorm(residual, hidden, *w.w2, T, out, norm_out, *norm, c.norm_eps);
        else if (residual.valid()) b.matmul_add(residual, hidden, *w.w2, T, out);
        else b.matmul(out, hidden, *w.w2, T);
    }

    // TransformerBlock.forward:
    //   h = x + attention(attention_norm(x))
    //   out = h + feed_forward(ffn_norm(h))
    // Where neither the trace nor an intervention needs attention_out / ffn_out on their own, the residual add
    // goes into the product (Backend::matmul_add): the same sums, one op fewer each. The RMSNorm that reads the
    // sum then goes with it (Backend::matmul_add_rmsnorm): ffn_norm after wo; after w2 `next_norm`, the norm of
    // the block's output that comes next (the next block's attention_norm or the final norm), unless an
    // intervention changes the output before it; `normed` then says so.
    void block(int64_t layer, const LayerWeights& w, const TensorView* next_norm) {
        const int64_t dim = c.dim;
        Buf x = s.x.at(0, T * dim);                // [T, dim] in: x; then h; out: the block's output
        Buf xn = s.xn.at(0, T * dim);              // [T, dim]
        Buf attn_out = s.attn_out.at(0, T * dim);  // [T, dim]
        Buf ffn_out = s.ffn_out.at(0, T * dim);    // [T, dim]

        if (!normed) b.rmsnorm(xn, x, *w.attention_norm, T, c.norm_eps);
        cap.keep(name(layer, "attention_norm"), xn, T, dim);
        if (cap.touches(name(layer, "attention_out"))) {
            attention(layer, w, xn, attn_out);
            cap.site(name(layer, "attention_out"), attn_out, T, dim);
            b.add(x, x, attn_out, T * dim);  // h
            b.rmsnorm(xn, x, *w.ffn_norm, T, c.norm_eps);
        } else {
            attention(layer, w, xn, attn_out, x, w.ffn_norm, xn);  // h, and ffn_norm(h) into xn
        }
        cap.keep(name(layer, "h"), x, T, dim);
        cap.keep(name(layer, "ffn_norm"), xn, T, dim);

        const std::string out_site = "h." + std::to_string(layer);
        normed = false;
        if (cap.touches(name(layer, "ffn_out"))) {
            feed_forward(layer, w, xn, ffn_out);
            cap.site(name(layer, "ffn_out"), ffn_out, T, dim);
            b.add(x, x, ffn_out, T * dim);  // out
        } else if (next_norm && !cap.changes(out_site)) {
            feed_forward(layer, w, xn, ffn_out, x, next_norm, xn);  // out, and next_norm(out) into xn
            normed = true;
        } else {
            feed_forward(layer, w, xn, ffn_out, x);  // out
        }
        cap.site(out_site, x, T, dim);
    }
};

}  // namespace

// ---------------------------------------------------------------------------------------------- Transformer

Transformer::Transformer(const Model& model, Backend& backend)
    : model_(&model), backend_(&backend), scratch_(std::make_unique<Scratch>()) {
    const ModelConfig& c = model.config;
    c.validate();
    for (int64_t l = 0; l < c.n_layers; ++l) {
        auto w = [&](const char* suffix) { return &model.tensor(names::layer(l, suffix)); };
        scratch_->layers.push_back(LayerWeights{w("attention_norm"), w("attention.wq"), w("attention.wk"),
                                                w("attention.wv"), w("attention.wo"), w("ffn_norm"),
                                                w("feed_forward.w1"), w("feed_forward.w2"), w("feed_forward.w3")});
    }
    scratch_->norm = &model.tensor("norm");
    scratch_->output = &model.output_weight();
}

Transformer::~Transformer() { scratch_->bufs.release(*backend_); }

Trace Transformer::prefill(KVCache& cache, std::span<const int32_t> tokens, const TraceRequest& request,
                           const std::atomic<bool>* cancel) {
    return step(cache, tokens, request, cancel);
}

Trace Transformer::decode(KVCache& cache, int32_t token, const TraceRequest& request) {
    return step(cache, std::span<const int32_t>(&token, 1), request, nullptr);
}

// Transformer.forward: h = tok_embeddings(tokens); every layer; h = norm(h); logits = output(h).
Trace Transformer::step(KVCache& cache, std::span<const int32_t> tokens, const TraceRequest& request,
                        const std::atomic<bool>* cancel) {
    const ModelConfig& c = model_->config;
    const auto T = static_cast<int64_t>(tokens.size());
    const int64_t pos0 = cache.size();
    if (T == 0) throw InputError("empty prompt: there are no tokens to run");
    for (int64_t t = 0; t < T; ++t) {
        const int32_t id = tokens[static_cast<size_t>(t)];
        if (id < 0 || id >= c.vocab_size)
            throw InputError("token id " + std::to_string(id) + " at position " + std::to_string(pos0 + t) +
                             " is outside the vocabulary (0.." + std::to_string(c.vocab_size - 1) + ")");
    }
    for (const Intervention& iv : request.interventions) validate(iv, c);
    if (pos0 + T > cache.capacity())
        throw InputError("too long for the context: " + std::to_string(pos0) + " tokens held + " + std::to_string(T) +
                         " new > " + std::to_string(cache.capacity()) + " positions");

    Backend& b = *backend_;
    StepBuffers& s = scratch_->bufs;
    const bool want_probs = request.attention_probs;
    const int64_t logits_rows = request.logits_all_positions ? T : 1;
    const int64_t held_rows = held_logits_rows(request, T);
    s.reserve(b, c, T, held_rows, want_probs ? c.n_heads * T * (pos0 + T) : 0);

    Trace trace;
    trace.pos0 = pos0;
    trace.tokens.assign(tokens.begin(), tokens.end());
    Captures cap(b, request, trace, pos0);
    Pass pass{b, c, s, cache, cap, T, pos0, want_probs};

    b.begin();
    Buf h = s.x.at(0, T * c.dim);  // [T, dim]
    b.embed(h, tokens);
    cap.keep("x0", h, T, c.dim);
    // A prompt runs one submission per layer (and a cancel is seen between them): display drivers reset a GPU
    // whose job runs past a few seconds, and a long prefill of a big model is minutes of work. A decode step is
    // small and is waited for once unless it can be cancelled (a backend may still hand it to its device in
    // parts as it records: the Vulkan backend does).
    const bool in_pieces = T > 1 || cancel;
    auto run_so_far = [&] {
        b.submit(cancel);
        cap.collect();
        if (cancel && cancel->load()) throw Cancelled();
        b.begin();
    };
    for (int64_t layer = 0; layer < c.n_layers; ++layer) {
        if (in_pieces && layer > 0) run_so_far();
        const bool last = layer + 1 == c.n_layers;
        pass.block(layer, scratch_->layers[static_cast<size_t>(layer)],
                   last ? scratch_->norm : scratch_->layers[static_cast<size_t>(layer + 1)].attention_norm);
    }
    Buf hn = s.xn.at(0, T * c.dim);  // [T, dim]
    if (!pass.normed) b.rmsnorm(hn, h, *scratch_->norm, T, c.norm_eps);
    cap.keep("norm", hn, T, c.dim);

    // Logits for every position, or only for the last (what generation needs).
    const int64_t V = c.vocab_size;
    Buf rows_in = logits_rows == T ? hn : hn.at((T - 1) * c.dim, c.dim);  // [logits_rows, dim]
    // The output projection of many rows is the largest single product of the pass: in pieces of rows, each
    // submitted alone. Unless the trace keeps every row, the pieces share one buffer of held_rows rows (a long
    // prompt's T x vocab logits are gigabytes): what each piece gives (top-k, on_logits) is read back with it.
    for (int64_t r0 = 0; r0 < logits_rows; r0 += kLogitRowsPerPiece) {
        if (in_pieces) run_so_far();
        const int64_t n = std::min(kLogitRowsPerPiece, logits_rows - r0);
        Buf piece = s.logits.at(held_rows == logits_rows ? r0 * V : 0, n * V);  // [n, vocab]
        b.matmul(piece, rows_in.at(r0 * c.dim, n * c.dim), *scratch_->output, n);
        if (request.top_k > 0)
            for (int64_t r = 0; r < n; ++r) cap.keep_top_k(piece.at(r * V, V), V, request.top_k);
        cap.logits_piece(piece, r0, n, V);
        if (r0 + n == logits_rows) cap.keep_last_logits(piece.at((n - 1) * V, V), V);
    }
    if (held_rows == logits_rows) cap.keep("logits", s.logits.at(0, logits_rows * V), logits_rows, V);
    b.submit(cancel);
    cap.collect();
    if (cancel && cancel->load()) throw Cancelled();

    cache.size_ = pos0 + T;
    return trace;
}

// logits = output(norm(h)) for rows of h the caller holds (the lens over a traced residual stream). Buffers of
// their own (kept in the scratch), so the step's buffers and any cache stay untouched.
std::vector<float> Transformer::project(std::span<const float> residual, int64_t rows) {
    const ModelConfig& c = model_->config;
    if (rows <= 0 || static_cast<int64_t>(residual.size()) != rows * c.dim)
        throw InputError("project: " + std::to_string(residual.size()) + " values are not " + std::to_string(rows) +
                         " rows of dim " + std::to_string(c.dim));
    Backend& b = *backend_;
    StepBuffers& s = scratch_->bufs;
    s.reserve_lens(b, c, rows);
    const Buf h = s.lens_h.at(0, rows * c.dim), hn = s.lens_hn.at(0, rows * c.dim);
    const Buf logits = s.lens_logits.at(0, rows * c.vocab_size);
    b.begin();
    b.write(h, residual);
    b.rmsnorm(hn, h, *scratch_->norm, rows, c.norm_eps);
    b.matmul(logits, hn, *scratch_->output, rows);
    const Readback r = b.readback(logits, rows * c.vocab_size);
    b.submit();
    return b.fetch(r);
}

// ---------------------------------------------------------------------------------------------- weights

namespace {

// True when the stored value's exponent bits are all ones (inf or nan), by storage type.
template <class U>
int64_t first_non_finite(const std::byte* p, int64_t n, U exponent_mask) {
    constexpr int64_t kChunk = 4096;
    for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
        const int64_t i1 = std::min(n, i0 + kChunk);
        // A branch-free pass over the chunk (vectorises), then find the element only if there is one.
        U any = 0;
        for (int64_t i = i0; i < i1; ++i) {
            U u;
            std::memcpy(&u, p + i * int64_t(sizeof(U)), sizeof(U));
            any |= static_cast<U>((u & exponent_mask) == exponent_mask);
        }
        if (!any) continue;
        for (int64_t i = i0; i < i1; ++i) {
            U u;
            std::memcpy(&u, p + i * int64_t(sizeof(U)), sizeof(U));
            if ((u & exponent_mask) == exponent_mask) return i;
        }
    }
    return -1;
}

}  // namespace

void check_weights_finite(const Model& model) {
    for (const auto& [name, t] : model.tensors) {
        const int64_t n = t.numel();
        int64_t bad = -1;
        switch (t.dtype) {
            case DType::F32: bad = first_non_finite<uint32_t>(t.data, n, 0x7f800000u); break;
            case DType::F16: bad = first_non_finite<uint16_t>(t.data, n, 0x7c00u); break;
            case DType::BF16: bad = first_non_finite<uint16_t>(t.data, n, 0x7f80u); break;
            default:  // block types: malformed blocks (non-finite f16 scales) are FormatErrors
                quant::validate(t.dtype, t.data, n,
                                "weight " + name + (t.source_name.empty() ? "" : " (" + t.source_name + ")") + " in " +
                                    t.file);
                continue;
        }
        if (bad < 0) continue;
        float value[1];
        const int64_t cols = t.cols();
        std::string where = "element " + std::to_string(bad);
        if (t.shape.size() >= 2) where += " (stored row " + std::to_string(bad / cols) + ", column " +
                                          std::to_string(bad % cols) + ")";
        switch (t.dtype) {
            case DType::F32: std::memcpy(value, t.data + 4 * bad, 4); break;
            default: {
                uint16_t h;
                std::memcpy(&h, t.data + 2 * bad, 2);
                value[0] = t.dtype == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
            }
        }
        throw ModelError("weight " + name + (t.source_name.empty() ? "" : " (" + t.source_name + ")") + " in " +
                         t.file + " has a non-finite value (" + (std::isnan(value[0]) ? "nan" : "inf") + ") at " +
                         where);
    }
}

}  // namespace strata
