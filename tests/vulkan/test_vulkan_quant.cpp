// GGUF block types (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K) on the Vulkan backend against the CPU backend: embed, decode
// (matrix-vector) and prefill (streaming and tiled) on random blocks with zero, extreme and subnormal f16 scales,
// at awkward sizes (odd block counts put half the Q8_0 / Q4_0 / Q6_K blocks on 2-byte boundaries), weights split
// over small bindings, and a quantized demonstration model end to end (Q4_K_M, also over 1 MiB bindings, and
// Q8_0). Lavapipe compiles every new pipeline for seconds: the cases are chosen to reach each kernel variant
// once or twice, not to multiply shapes.
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>

#include "strata/demo.hpp"
#include "strata/error.hpp"
#include "strata/quant.hpp"
#include "strata/transformer.hpp"
#include "vk_helpers.hpp"

using namespace strata;
using namespace strata::test;
namespace fs = std::filesystem;

namespace {

const DType kBlockTypes[] = {DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};

// How a row's f16 scales are drawn: a mix per block (ordinary, zero, subnormal, extreme), or the whole row
// subnormal / extreme, so that a row's output depends on those scales alone and a decoder that flushed or
// misread them shows up in that row's error.
enum class Scales { Mixed, Subnormal, Extreme };

uint16_t draw_scale(std::mt19937_64& rng, Scales s) {
    std::uniform_int_distribution<int> pick(0, 9);
    const uint16_t sign = (rng() & 1) ? 0x8000 : 0;
    auto subnormal = [&] { return static_cast<uint16_t>(sign | (1 + rng() % 0x3FF)); };  // 2^-24 .. ~2^-14
    auto extreme = [&] { return static_cast<uint16_t>(sign | (0x7800 + rng() % 0x400)); };  // 32768 .. 65504
    if (s == Scales::Subnormal) return subnormal();
    if (s == Scales::Extreme) return extreme();
    const int k = pick(rng);
    if (k == 0) return 0;
    if (k == 1) return subnormal();
    if (k == 2) return extreme();
    std::uniform_real_distribution<float> mag(-10.0f, -2.0f);
    return static_cast<uint16_t>(sign | f32_to_f16(std::exp2(mag(rng))));
}

// Byte offsets of the f16 scales inside one block of type t.
std::vector<int> scale_offsets(DType t) {
    switch (t) {
        case DType::Q8_0:
        case DType::Q4_0: return {0};
        case DType::Q4_K:
        case DType::Q5_K: return {0, 2};  // d, dmin
        case DType::Q6_K: return {208};
        default: return {};
    }
}

// Random blocks for a [rows, cols] matrix: every quant and sub-scale byte random, f16 scales as `scales_of(row)`.
std::unique_ptr<OwnedTensor> random_blocks(const std::string& name, DType t, int64_t rows, int64_t cols,
                                           uint64_t seed, const std::function<Scales(int64_t)>& scales_of) {
    auto owned = std::make_unique<OwnedTensor>();
    const int64_t per_row = cols / dtype_block_size(t), bb = dtype_block_bytes(t);
    owned->bytes.resize(static_cast<size_t>(rows * per_row * bb));
    std::mt19937_64 rng(seed);
    for (std::byte& b : owned->bytes) b = static_cast<std::byte>(rng() & 0xFF);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = 0; i < per_row; ++i)
            for (int off : scale_offsets(t)) {
                const uint16_t h = draw_scale(rng, scales_of(r));
                std::memcpy(owned->bytes.data() + (r * per_row + i) * bb + off, &h, 2);
            }
    view_own_bytes(*owned, name, t, {rows, cols});
    return owned;
}

Scales row_scales(int64_t r) { return r % 5 == 1 ? Scales::Subnormal : r % 5 == 3 ? Scales::Extreme : Scales::Mixed; }

class Backends {
public:
    Backend& get(bool vulkan, uint64_t range = 0) {
        auto& b = backends_[{vulkan, range}];
        if (!b) b = vulkan ? make_vulkan(range) : make_cpu();
        return *b;
    }

private:
    std::map<std::pair<bool, uint64_t>, std::unique_ptr<Backend>> backends_;
};

void check_matmul(Backends& backends, DType t, int64_t N, int64_t K, int64_t T, int64_t x_offset = 0,
                  uint64_t range = 0) {
    INFO(dtype_name(t) << " w [" << N << ", " << K << "], T = " << T << ", x offset " << x_offset
                       << ", binding range " << range);
    Filler f;
    const std::vector<float> xv = random_floats(T * K, 61);
    const int32_t ix = f.add(xv);
    const Model& m = f.model();
    auto w = random_blocks("w", t, N, K, 62 + uint64_t(N) * 7 + uint64_t(K), row_scales);
    const std::vector<float> want = run_matmul(backends.get(false), m, f, ix, w->view, T, x_offset);
    const std::vector<float> got = run_matmul(backends.get(true, range), m, f, ix, w->view, T, x_offset);
    require_close_terms(got, want, dequantized(w->view), xv, N, K, T, 1e-6 * std::sqrt(double(K)) + 1e-6);
}

// Awkward row lengths per type: an odd number of blocks, and a long row.
std::vector<int64_t> awkward_cols(DType t) {
    return dtype_block_size(t) == 32 ? std::vector<int64_t>{32, 96, 4064} : std::vector<int64_t>{256, 768, 2048};
}

}  // namespace

TEST_CASE("quantized embed matches the CPU backend for every block type, also split over bindings",
          "[vulkan][quant]") {
    Backends backends;
    const int64_t V = 1000;
    const std::vector<int32_t> tokens = {0, 999, 1, 3, 3, 500, 123, 998};
    const auto T = static_cast<int64_t>(tokens.size());
    for (DType t : kBlockTypes) {
        // 3 blocks per row (2 for K types): odd rows of Q8_0 / Q4_0 / Q6_K start on 2-byte boundaries.
        const int64_t W = dtype_block_size(t) == 32 ? 96 : 512;
        auto table = random_blocks("tok_embeddings", t, V, W, 71, row_scales);
        Model m;
        m.config.dim = W;
        m.config.n_layers = 1;
        m.config.n_heads = 1;
        m.config.n_kv_heads = 1;
        m.config.head_dim = 2;
        m.config.hidden_dim = 1;
        m.config.vocab_size = V;
        m.config.bos_id = 0;
        m.tensors["tok_embeddings"] = table->view;
        // The CPU backend's rows, then the Vulkan backend's at the device's binding range and at 16 KiB (a table
        // of 288 KiB (K types) or 33 / 54 KiB becomes several chunks of whole rows).
        std::vector<float> want;
        for (uint64_t range : {uint64_t(1), uint64_t(0), uint64_t(16384)}) {
            INFO(dtype_name(t) << (range == 1 ? ", CPU" : ", Vulkan, binding range ") << range);
            Backend& b = range == 1 ? backends.get(false) : backends.get(true, range);
            b.load(m);
            Buf out = b.alloc(T * W + 2 * Guarded::kPad, "out");  // zeros around the rows
            b.begin();
            b.embed(out.at(Guarded::kPad, T * W), tokens);
            Readback r = b.readback(out, T * W + 2 * Guarded::kPad);
            b.submit();
            const std::vector<float> all = b.fetch(r);
            b.free(out);
            for (int64_t i = 0; i < Guarded::kPad; ++i)
                REQUIRE((all[size_t(i)] == 0 && all[all.size() - 1 - size_t(i)] == 0));
            const std::vector<float> got(all.begin() + Guarded::kPad, all.end() - Guarded::kPad);
            REQUIRE(all_finite(got));
            if (range == 1) {
                want = got;
                continue;
            }
            // Each weight is a * q + b, rounded per step: equal to the CPU's within a rounding (a fused
            // multiply-add may round once where the CPU rounds twice), subnormal scales included.
            int64_t exact = 0;
            for (size_t i = 0; i < got.size(); ++i) {
                INFO("element " << i % size_t(W) << " of row " << tokens[i / size_t(W)]);
                REQUIRE(std::fabs(got[i] - want[i]) <= 1e-6f * std::fabs(want[i]));
                exact += got[i] == want[i];
            }
            UNSCOPED_INFO(dtype_name(t) << ": " << exact << " of " << got.size() << " elements bit-equal");
        }
    }
    require_no_validation_messages();
}

TEST_CASE("f16 weights widen exactly on the device, subnormals included (unpackHalf2x16)", "[vulkan][quant]") {
    // The F16 path (weights.glsl) widens with unpackHalf2x16, the block types with their own decoder; both must
    // keep the 1023 subnormal magnitudes, which a driver that flushed them would turn into zeros.
    const int64_t V = 64, W = 32;  // 2048 values: every subnormal (both signs), then ordinary ones
    std::vector<uint16_t> bits(static_cast<size_t>(V * W));
    for (size_t i = 0; i < bits.size(); ++i)
        bits[i] = i < 2046 ? static_cast<uint16_t>((i & 1 ? 0x8000 : 0) | (1 + i / 2)) : static_cast<uint16_t>(0x3C00 + i);
    auto table = std::make_unique<OwnedTensor>();
    table->bytes.resize(bits.size() * 2);
    std::memcpy(table->bytes.data(), bits.data(), table->bytes.size());
    TensorView& v = table->view;
    v.name = v.source_name = "tok_embeddings";
    v.dtype = DType::F16;
    v.shape = {V, W};
    v.data = table->bytes.data();
    v.nbytes = table->bytes.size();
    Model m;
    m.config.dim = W;
    m.config.n_layers = 1;
    m.config.n_heads = 1;
    m.config.n_kv_heads = 1;
    m.config.head_dim = 2;
    m.config.hidden_dim = 1;
    m.config.vocab_size = V;
    m.config.bos_id = 0;
    m.tensors["tok_embeddings"] = v;
    std::vector<int32_t> tokens(static_cast<size_t>(V));
    for (int32_t i = 0; i < V; ++i) tokens[size_t(i)] = i;
    auto gpu = make_vulkan();
    gpu->load(m);
    Buf out = gpu->alloc(V * W, "out");
    gpu->begin();
    gpu->embed(out, tokens);
    Readback r = gpu->readback(out, V * W);
    gpu->submit();
    const std::vector<float> got = gpu->fetch(r);
    for (size_t i = 0; i < bits.size(); ++i) {
        INFO("f16 bits 0x" << std::hex << bits[i]);
        REQUIRE(got[i] == f16_to_f32(bits[i]));
    }
    require_no_validation_messages();
}

TEST_CASE("quantized matmul for decode (T = 1) matches the CPU backend, in each workgroup shape", "[vulkan][quant]") {
    // The device's own shape (one subgroup per workgroup on lavapipe, whole units per invocation), then a GPU's
    // (several subgroups, a unit's quads on neighbouring invocations), then the quads in the device's shape.
    struct Mode {
        const char* matvec;
        const char* quad_lanes;
    };
    for (const Mode& mode : {Mode{"", ""}, Mode{"128,2", "1"}, Mode{"", "1"}}) {
        INFO("STRATA_VK_MATVEC=" << mode.matvec << " STRATA_VK_QUAD_LANES=" << mode.quad_lanes);
        ScopedEnv env("STRATA_VK_MATVEC", mode.matvec);
        ScopedEnv quads("STRATA_VK_QUAD_LANES", mode.quad_lanes);
        Backends backends;
        for (DType t : kBlockTypes) {
            const auto cols = awkward_cols(t);
            check_matmul(backends, t, 1, cols[0], 1);
            check_matmul(backends, t, 37, cols[1], 1);
            check_matmul(backends, t, 5, cols[2], 1);
            // x not on a 16-byte boundary: scalar x loads (once per way: lavapipe compiles every variant afresh).
            if (std::string(mode.matvec).empty()) check_matmul(backends, t, 33, cols[1], 1, 1);
        }
    }
    require_no_validation_messages();
}

TEST_CASE("quantized matmul for prefill (T > 1) matches the CPU backend, streaming and tiled", "[vulkan][quant]") {
    struct Mode {
        const char* tiled_from;
        const char* matvec;
        const char* quad_lanes;
        const char* tile8 = "";
    };
    // Streaming (8 tokens per weight load, as lavapipe runs prompts under 64 tokens; the several-subgroup
    // reduction is the one decode uses, checked above) and tiled (from 2 tokens, so that it is reached here), with
    // 4 x 8 and 8 x 8 outputs per invocation. Lavapipe compiles each pipeline for seconds, so the cases are few:
    // a partial group of tokens, and several tiles of tokens and rows with a partial last one.
    // Streaming also with a unit's quads on neighbouring invocations (a GPU's way).
    for (const Mode& mode :
         {Mode{"1000000", "", ""}, Mode{"2", "", ""}, Mode{"2", "", "", "1"}, Mode{"1000000", "", "1"}}) {
        INFO("STRATA_VK_TILED_FROM=" << mode.tiled_from << " STRATA_VK_MATVEC=" << mode.matvec
                                     << " STRATA_VK_QUAD_LANES=" << mode.quad_lanes
                                     << " STRATA_VK_MATMUL_TILE8=" << mode.tile8);
        ScopedEnv tiled("STRATA_VK_TILED_FROM", mode.tiled_from);
        ScopedEnv shape("STRATA_VK_MATVEC", mode.matvec);
        ScopedEnv quads("STRATA_VK_QUAD_LANES", mode.quad_lanes);
        ScopedEnv tile8("STRATA_VK_MATMUL_TILE8", mode.tile8);
        Backends backends;
        for (DType t : kBlockTypes) {
            const auto cols = awkward_cols(t);
            check_matmul(backends, t, 37, cols[1], 7);
            check_matmul(backends, t, 65, cols[0], 70);
        }
        check_matmul(backends, DType::Q4_0, 65, 96, 70, 3);  // x not on a 16-byte boundary
    }
    require_no_validation_messages();
}

TEST_CASE("block types' bytes become the same floats through their float bits as by conversion",
          "[vulkan][quant]") {
    // quant.glsl's two ways from a byte to a float (BYTE_FLOAT_BITS: a GPU's default, conversion: a CPU
    // device's) must give the same floats, so every product and embedding row equals the other way's bit for bit;
    // and the float-bits way matches the CPU backend on its own. Decode, an 8-token streaming prompt, the tiled
    // prefill and the embedding, for every block type (signed Q8_0 bytes and the unsigned ones of the others).
    struct Mode {
        const char* tiled_from;
        std::vector<int64_t> Ts;
    };
    for (const Mode& mode : {Mode{"1000000", {1, 7}}, Mode{"2", {70}}}) {
        ScopedEnv tiled("STRATA_VK_TILED_FROM", mode.tiled_from);
        std::map<std::string, std::vector<float>> by_way[2];
        for (int bits = 0; bits < 2; ++bits) {
            ScopedEnv way("STRATA_VK_BYTE_FLOAT_BITS", bits ? "1" : "0");
            Backends backends;
            for (DType t : kBlockTypes)
                for (int64_t T : mode.Ts) {
                    const int64_t N = 37, K = awkward_cols(t)[1];
                    INFO(dtype_name(t) << " w [" << N << ", " << K << "], T = " << T << ", float bits " << bits
                                       << ", STRATA_VK_TILED_FROM=" << mode.tiled_from);
                    Filler f;
                    const std::vector<float> xv = random_floats(T * K, 81);
                    const int32_t ix = f.add(xv);
                    auto w = random_blocks("w", t, N, K, 82 + uint64_t(K), row_scales);
                    std::vector<float> got = run_matmul(backends.get(true), f.model(), f, ix, w->view, T, 0);
                    if (bits) {
                        const std::vector<float> want =
                            run_matmul(backends.get(false), f.model(), f, ix, w->view, T, 0);
                        require_close_terms(got, want, dequantized(w->view), xv, N, K, T,
                                            1e-6 * std::sqrt(double(K)) + 1e-6);
                    }
                    by_way[bits][std::string(dtype_name(t)) + " T " + std::to_string(T)] = std::move(got);
                }
            if (mode.Ts[0] != 1) continue;
            for (DType t : kBlockTypes) {  // the embedding rows (weight_rc)
                const int64_t V = 40, W = dtype_block_size(t) == 32 ? 96 : 512;
                auto table = random_blocks("tok_embeddings", t, V, W, 83, row_scales);
                Model m;
                m.config.dim = W;
                m.config.n_layers = m.config.n_heads = m.config.n_kv_heads = m.config.hidden_dim = 1;
                m.config.head_dim = 2;
                m.config.vocab_size = V;
                m.config.bos_id = 0;
                m.tensors["tok_embeddings"] = table->view;
                const std::vector<int32_t> tokens = {0, 39, 1, 17, 17, 5};
                Backend& b = backends.get(true);
                b.load(m);
                Buf out = b.alloc(int64_t(tokens.size()) * W, "out");
                b.begin();
                b.embed(out, tokens);
                Readback r = b.readback(out, int64_t(tokens.size()) * W);
                b.submit();
                by_way[bits][std::string(dtype_name(t)) + " embed"] = b.fetch(r);
                b.free(out);
            }
        }
        for (const auto& [what, conv] : by_way[0]) {
            INFO(what << ", STRATA_VK_TILED_FROM=" << mode.tiled_from);
            const std::vector<float>& fb = by_way[1].at(what);
            REQUIRE(fb.size() == conv.size());
            REQUIRE(all_finite(fb));
            REQUIRE(std::memcmp(fb.data(), conv.data(), fb.size() * sizeof(float)) == 0);
        }
    }
    require_no_validation_messages();
}

TEST_CASE("a quantized weight split across several bindings gives the same result", "[vulkan][quant]") {
    Backends backends;
    // 16 KiB per binding: Q4_0 rows of 96 (54 bytes, 303 rows a chunk) and Q6_K rows of 512 (420 bytes, 39 rows
    // a chunk); chunks are whole rows, so whole blocks.
    check_matmul(backends, DType::Q4_0, 700, 96, 1, 0, 16384);
    check_matmul(backends, DType::Q6_K, 130, 512, 1, 0, 16384);
    check_matmul(backends, DType::Q8_0, 300, 160, 5, 0, 16384);
    {
        ScopedEnv tiled("STRATA_VK_TILED_FROM", "2");
        Backends tiled_backends;
        check_matmul(tiled_backends, DType::Q5_K, 130, 512, 9, 0, 16384);
    }
    require_no_validation_messages();
}

TEST_CASE("block types the Vulkan backend cannot use are refused with a clear error", "[vulkan][quant]") {
    Filler f;
    const Model& m = f.model();
    auto gpu = make_vulkan();
    gpu->load(m);
    // A row that is not whole blocks.
    auto ragged = random_blocks("w", DType::Q4_K, 2, 256, 5, row_scales);
    ragged->view.shape = {4, 128};
    Buf x = gpu->alloc(512, "x"), y = gpu->alloc(8, "y");
    gpu->begin();
    try {
        gpu->matmul(y, x, ragged->view, 1);
        FAIL("a Q4_K row of 128 should be refused");
    } catch (const ModelError& e) {
        CHECK_THAT(e.what(), Catch::Contains("Q4_K") && Catch::Contains("block size 256"));
    }
    // A quantized rmsnorm gain (GGUF keeps norms in F32).
    auto gain = random_blocks("norm", DType::Q8_0, 1, 32, 6, row_scales);
    gain->view.shape = {32};
    try {
        gpu->rmsnorm(y, x, gain->view, 1, 1e-5f);
        FAIL("a Q8_0 gain should be refused");
    } catch (const UnsupportedError& e) {
        CHECK_THAT(e.what(), Catch::Contains("Q8_0") && Catch::Contains("rmsnorm"));
    }
    // A malformed block (an infinite f16 scale) fails where the weights are uploaded, naming the tensor.
    auto bad = random_blocks("layers.0.feed_forward.w2", DType::Q6_K, 3, 512, 7, row_scales);
    const uint16_t inf = 0x7C00;
    std::memcpy(bad->bytes.data() + 2 * dtype_block_bytes(DType::Q6_K) + 208, &inf, 2);  // row 1, block 0
    try {
        gpu->matmul(y, x, bad->view, 1);
        FAIL("an infinite scale should be refused");
    } catch (const FormatError& e) {
        CHECK_THAT(e.what(), Catch::Contains("layers.0.feed_forward.w2"));
    }
    gpu->submit();
    require_no_validation_messages();
}

// ---------------------------------------------------------------------------------------------- whole model

namespace {

// The demonstration model (dims multiples of 256, so that every tensor can be a K type), loaded once.
const Model& demo_model() {
    static std::unique_ptr<Model> model = [] {
        const fs::path dir = temp_dir("quant-demo");
        DemoOptions o;
        o.random = true;
        o.dim = 256;
        o.n_layers = 2;
        o.n_heads = 4;
        o.n_kv_heads = 2;
        o.hidden_dim = 512;
        make_demo_model(dir, tokenizer_json(), o);
        return load_model(dir);
    }();
    return *model;
}

// A copy of the demo model's views with every matrix quantized (norms stay as they are), in memory.
struct QuantizedModel {
    Model model;
    std::map<std::string, std::vector<std::byte>> bytes;
};

// type_of(name) gives each matrix's type: a whole-file type, or a Q4_K_M-like mix.
std::unique_ptr<QuantizedModel> quantize_demo(const std::function<DType(const std::string&)>& type_of) {
    const Model& src = demo_model();
    auto q = std::make_unique<QuantizedModel>();
    q->model.config = src.config;
    q->model.format = CheckpointFormat::GGUF;
    q->model.rope_freqs_factors = src.rope_freqs_factors;
    for (const auto& [name, t] : src.tensors) {
        TensorView v = t;
        if (t.shape.size() == 2) {
            const DType type = type_of(name);
            const std::vector<float> f = t.to_f32();  // canonical row order
            std::vector<std::byte>& b = q->bytes[name];
            b.resize(dtype_bytes(type, t.numel()));
            quant::quantize(type, f.data(), b.data(), t.numel());
            v.dtype = type;
            v.data = b.data();
            v.nbytes = b.size();
            v.rope_heads = 0;
            v.file = "(quantized in memory)";
        }
        q->model.tensors[name] = v;
    }
    return q;
}

DType q4_k_m(const std::string& name) {
    // llama.cpp's Q4_K_M keeps the output and (in some layers) attention.wv and feed_forward.w2 at Q6_K.
    if (name == "output" || name.find("attention.wv") != std::string::npos ||
        name.find("feed_forward.w2") != std::string::npos)
        return DType::Q6_K;
    return DType::Q4_K;
}

struct Run {
    std::vector<float> prompt_logits;  // [T, vocab]
    std::vector<int32_t> greedy;
};

Run run_model(const Model& m, Backend& b, const std::vector<int32_t>& prompt, int n_new) {
    b.load(m);
    Transformer tf(m, b);
    KVCache cache(b, m.config, 64);
    TraceRequest req;
    req.logits_all_positions = true;
    req.keep_logits = true;
    req.residuals = false;
    req.top_k = 0;
    Run r;
    Trace t = tf.prefill(cache, prompt, req);
    r.prompt_logits = t.find("logits")->data;
    std::vector<float> logits = t.last_logits;
    TraceRequest cheap;
    cheap.residuals = false;
    cheap.top_k = 0;
    for (int i = 0; i < n_new; ++i) {
        const auto id = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
        r.greedy.push_back(id);
        if (i + 1 < n_new) logits = tf.decode(cache, id, cheap).last_logits;
    }
    return r;
}

}  // namespace

TEST_CASE("a quantized model gives the CPU backend's logits and greedy tokens, also split over bindings",
          "[vulkan][quant][model]") {
    const std::vector<int32_t> prompt = {128000, 791, 4062, 14198, 39935, 35308, 927, 279, 16053, 5679};
    struct Mix {
        const char* name;
        std::function<DType(const std::string&)> type_of;
    };
    const Mix mixes[] = {
        {"Q4_K_M", q4_k_m},
        {"Q8_0", [](const std::string&) { return DType::Q8_0; }},  // 34-byte blocks: half on 2-byte boundaries
    };
    auto cpu = make_cpu();
    for (const Mix& mix : mixes) {
        auto q = quantize_demo(mix.type_of);
        REQUIRE(q->model.tensor("tok_embeddings").dtype == mix.type_of("tok_embeddings"));
        const Run want = run_model(q->model, *cpu, prompt, 4);
        // Q4_K_M also with 1 MiB bindings: tok_embeddings (128256 x 256 Q4_K, 17.6 MiB) and output (Q6_K,
        // 25.7 MiB) become 18 and 26 chunks of whole rows.
        for (uint64_t range : {uint64_t(0), uint64_t(1) << 20}) {
            if (range != 0 && mix.type_of("output") != DType::Q6_K) continue;
            INFO(mix.name << ", binding range " << range);
            auto gpu = make_vulkan(range);
            const Run got = run_model(q->model, *gpu, prompt, 4);
            require_close(got.prompt_logits, want.prompt_logits, 1e-4);
            CHECK(got.greedy == want.greedy);
        }
    }
    require_no_validation_messages();
}
