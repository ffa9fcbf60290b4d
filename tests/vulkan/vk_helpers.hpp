#pragma once
// Helpers for the Vulkan tests: backends (validation on), a tiny "filler" model whose tok_embeddings table
// carries every input value so that embed() can put them into buffers on either backend, random weights in
// each stored type, sentinel checks, and the rule that no validation message may have been recorded.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "catch.hpp"
#include "strata/backend.hpp"
#include "strata/dtype.hpp"
#include "strata/model.hpp"
#include "strata/quant.hpp"
#include "strata/vulkan.hpp"
#include "support.hpp"

namespace strata::test {

// Validation is on unless STRATA_VK_VALIDATION=0 says otherwise (ctest sets it to 1).
inline BackendOptions vulkan_options(uint64_t max_binding_range = 0) {
    BackendOptions o;
    o.name = "vulkan";
    const char* e = std::getenv("STRATA_VK_VALIDATION");
    o.validation = !(e && std::string(e) == "0");
    o.max_binding_range = max_binding_range;
    return o;
}

inline std::unique_ptr<Backend> make_vulkan(uint64_t max_binding_range = 0) {
    return make_backend(vulkan_options(max_binding_range));
}

inline std::unique_ptr<Backend> make_cpu() {
    BackendOptions o;
    o.name = "cpu";
    o.threads = 2;
    return make_backend(o);
}

// Sets an environment variable for the life of the object (backends read their tuning when created).
class ScopedEnv {
public:
    ScopedEnv(const char* name, const char* value) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old, had_ = true;
        ::setenv(name, value, 1);
    }
    ~ScopedEnv() {
        if (had_)
            ::setenv(name_.c_str(), old_.c_str(), 1);
        else
            ::unsetenv(name_.c_str());
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
    std::string name_, old_;
    bool had_ = false;
};

// Fails the test when the validation layer said anything since the last call (and forgets what it said).
inline void require_no_validation_messages() {
    const std::vector<std::string> messages = vulkan_validation_messages();
    clear_vulkan_validation_messages();
    for (const std::string& m : messages) UNSCOPED_INFO(m);
    REQUIRE(messages.empty());
}

inline std::vector<float> random_floats(int64_t n, uint64_t seed, float scale = 1.0f) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> dist(0.0f, scale);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = dist(rng);
    return v;
}

// A weight tensor that owns its bytes: random values stored as `type`.
struct OwnedTensor {
    std::vector<std::byte> bytes;
    TensorView view;
};

// t's view over its own bytes (filled by the caller), as stored type `type` and `shape`.
inline void view_own_bytes(OwnedTensor& t, const std::string& name, DType type, std::vector<int64_t> shape) {
    t.view.name = name;
    t.view.source_name = name;
    t.view.dtype = type;
    t.view.shape = std::move(shape);
    t.view.data = t.bytes.data();
    t.view.nbytes = t.bytes.size();
    t.view.file = "(test)";
}

inline std::unique_ptr<OwnedTensor> make_tensor(const std::string& name, DType type, std::vector<int64_t> shape,
                                                const std::vector<float>& values) {
    auto t = std::make_unique<OwnedTensor>();
    const size_t n = values.size();
    t->bytes.resize(type == DType::F32 ? 4 * n : 2 * n);
    for (size_t i = 0; i < n; ++i) {
        if (type == DType::F32) {
            std::memcpy(t->bytes.data() + 4 * i, &values[i], 4);
        } else {
            const uint16_t h = type == DType::F16 ? f32_to_f16(values[i]) : f32_to_bf16(values[i]);
            std::memcpy(t->bytes.data() + 2 * i, &h, 2);
        }
    }
    view_own_bytes(*t, name, type, std::move(shape));
    return t;
}

inline std::unique_ptr<OwnedTensor> random_tensor(const std::string& name, DType type, std::vector<int64_t> shape,
                                                  uint64_t seed, float scale = 1.0f) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return make_tensor(name, type, std::move(shape), random_floats(n, seed, scale));
}

constexpr float kSentinel = -7777.25f;

// Values registered here become rows of a [R, 1] float32 tok_embeddings table; a model with dim 1 and the
// attention shape of the test then lets embed() write any registered values into a buffer on either backend.
class Filler {
public:
    Filler() { sentinel_ = add(std::vector<float>{kSentinel}); }
    int32_t add(const std::vector<float>& values) {
        const auto id = static_cast<int32_t>(table_.size());
        table_.insert(table_.end(), values.begin(), values.end());
        return id;
    }
    // Builds the model (call once, after every add()). Attention shape as given; dim is 1.
    const Model& model(int64_t n_heads = 1, int64_t n_kv_heads = 1, int64_t head_dim = 2, int64_t max_seq_len = 64,
                       bool rope_scaling = false) {
        model_ = std::make_unique<Model>();
        ModelConfig& c = model_->config;
        c.dim = 1;
        c.n_layers = 1;
        c.n_heads = n_heads;
        c.n_kv_heads = n_kv_heads;
        c.head_dim = head_dim;
        c.hidden_dim = 1;
        c.vocab_size = static_cast<int64_t>(table_.size());
        c.bos_id = 0;
        c.max_seq_len = max_seq_len;
        c.rope_scaling.enabled = rope_scaling;
        c.name = "filler";
        tensor_ = make_tensor("tok_embeddings", DType::F32, {static_cast<int64_t>(table_.size()), 1}, table_);
        model_->tensors["tok_embeddings"] = tensor_->view;
        return *model_;
    }
    // dst[0 .. n) = the n values registered at `id`.
    void fill(Backend& b, Buf dst, int32_t id, int64_t n) const {
        std::vector<int32_t> tokens(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) tokens[static_cast<size_t>(i)] = id + static_cast<int32_t>(i);
        b.embed(dst.at(0, n), tokens);
    }
    void fill_sentinel(Backend& b, Buf dst, int64_t n) const {
        std::vector<int32_t> tokens(static_cast<size_t>(n), sentinel_);
        b.embed(dst.at(0, n), tokens);
    }

private:
    std::vector<float> table_;
    int32_t sentinel_ = 0;
    std::unique_ptr<Model> model_;
    std::unique_ptr<OwnedTensor> tensor_;
};

// An output buffer with `pad` sentinels on each side of n values; check() reads it back and verifies the
// sentinels survived, returning the n values.
struct Guarded {
    static constexpr int64_t kPad = 37;
    Buf whole;
    int64_t n = 0;
    Buf inner() const { return whole.at(kPad, n); }

    static Guarded make(Backend& b, const Filler& f, int64_t n, const char* name) {
        Guarded g;
        g.n = n;
        g.whole = b.alloc(n + 2 * kPad, name);
        f.fill_sentinel(b, g.whole, n + 2 * kPad);
        return g;
    }
};

inline std::vector<float> unguard(const std::vector<float>& all, int64_t n) {
    REQUIRE(static_cast<int64_t>(all.size()) == n + 2 * Guarded::kPad);
    for (int64_t i = 0; i < Guarded::kPad; ++i) {
        INFO("sentinel " << i << " before / after the output");
        REQUIRE(all[static_cast<size_t>(i)] == kSentinel);
        REQUIRE(all[static_cast<size_t>(Guarded::kPad + n + i)] == kSentinel);
    }
    return std::vector<float>(all.begin() + Guarded::kPad, all.begin() + Guarded::kPad + n);
}

// Output of one backend vs the CPU reference: both finite, normalised error under tol.
inline void require_close(const std::vector<float>& got, const std::vector<float>& want, double tol) {
    REQUIRE(got.size() == want.size());
    REQUIRE(all_finite(got));
    REQUIRE(all_finite(want));
    const double err = rel_l2(got, want);
    INFO("relative L2 error " << err << " (tolerance " << tol << ")");
    REQUIRE(err <= tol);
}

// The weights of w as float32, whatever their stored type.
inline std::vector<float> dequantized(const TensorView& w) {
    std::vector<float> out(static_cast<size_t>(w.rows() * w.cols()));
    quant::dequantize(w.dtype, w.data, out.data(), w.rows() * w.cols());
    return out;
}

// Each output against the CPU backend's, normalised by the size of its terms: |got - want| <= tol * sum|w x|
// (a row whose scales are all subnormal is judged on its own scale, not drowned by an extreme one).
inline void require_close_terms(const std::vector<float>& got, const std::vector<float>& want,
                                const std::vector<float>& w, const std::vector<float>& x, int64_t N, int64_t K,
                                int64_t T, double tol) {
    REQUIRE(got.size() == want.size());
    REQUIRE(all_finite(got));
    REQUIRE(all_finite(want));
    double worst = 0;
    int64_t worst_at = -1;
    for (int64_t t = 0; t < T; ++t)
        for (int64_t n = 0; n < N; ++n) {
            double mag = 0;
            for (int64_t k = 0; k < K; ++k) mag += std::fabs(double(w[size_t(n * K + k)]) * x[size_t(t * K + k)]);
            const size_t i = size_t(t * N + n);
            const double err = std::fabs(double(got[i]) - want[i]) / std::max(mag, 1e-30);
            if (err > worst) worst = err, worst_at = int64_t(i);
        }
    INFO("worst normalised error " << worst << " at output " << worst_at << " (tolerance " << tol << ")");
    REQUIRE(worst <= tol);
}

// w x on backend b for the T rows of x registered at ix (loaded into b as the filler's model), x starting
// x_offset floats into its buffer; the output is guarded by sentinels.
inline std::vector<float> run_matmul(Backend& b, const Model& m, const Filler& f, int32_t ix, const TensorView& w,
                                     int64_t T, int64_t x_offset) {
    const int64_t N = w.rows(), K = w.cols();
    b.load(m);
    Buf x = b.alloc(x_offset + T * K, "x");
    b.begin();
    f.fill(b, x.at(x_offset, T * K), ix, T * K);
    Guarded out = Guarded::make(b, f, T * N, "out");
    b.matmul(out.inner(), x.at(x_offset, T * K), w, T);
    Readback r = b.readback(out.whole, T * N + 2 * Guarded::kPad);
    b.submit();
    std::vector<float> got = unguard(b.fetch(r), T * N);
    b.free(x);
    b.free(out.whole);
    return got;
}

}  // namespace strata::test
