// GGUF reading against files assembled byte by byte (test_gguf_fixture.hpp), and every kind of bad file: each gets
// its own typed error naming the file and what is wrong.
#include <cstring>

#include "catch.hpp"
#include "support.hpp"
#include "test_gguf_fixture.hpp"

#include "strata/error.hpp"
#include "strata/gguf.hpp"
#include "strata/model.hpp"
#include "strata/writers.hpp"

namespace fs = std::filesystem;
using namespace strata;
using strata::test::tiny_llama;
using strata::test::TinyGguf;

namespace {

fs::path save(const TinyGguf& g, const std::string& tag) {
    const fs::path p = test::temp_dir("gguf-" + tag) / (tag + ".gguf");
    test::write_file(p, g.build());
    return p;
}

// The message of the E that load_gguf throws for `g` (a test failure when it throws nothing or something else).
// Every message must name the file.
template <typename E>
std::string load_error(const TinyGguf& g, const std::string& tag) {
    const fs::path p = save(g, tag);
    try {
        load_gguf(p, {});
    } catch (const E& e) {
        const std::string msg = e.what();
        INFO(msg);
        CHECK(msg.find(p.string()) != std::string::npos);
        return msg;
    } catch (const std::exception& e) {
        FAIL("wrong exception type: " << e.what());
    }
    FAIL("no exception for " << tag);
    return {};
}

bool has(const std::string& msg, const std::string& part) { return msg.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a GGUF assembled by hand loads: config, reversed dims, values, tied output", "[gguf]") {
    const fs::path p = save(tiny_llama(), "tiny");
    const auto m = load_gguf(p, {});
    const ModelConfig& c = m->config;
    CHECK(c.dim == 8);
    CHECK(c.n_layers == 1);
    CHECK(c.n_heads == 2);
    CHECK(c.n_kv_heads == 1);
    CHECK(c.head_dim == 4);
    CHECK(c.hidden_dim == 16);
    CHECK(c.vocab_size == 258);
    CHECK(c.max_seq_len == 64);
    CHECK(c.norm_eps == 1e-5f);
    CHECK(c.rope_theta == 500000.0f);
    CHECK(c.bos_id == 256);
    CHECK(c.eos_ids == std::vector<int32_t>{257});
    CHECK(c.tie_embeddings);
    CHECK_FALSE(c.rope_scaling.enabled);
    CHECK(m->rope_freqs_factors.empty());
    // ne = [in, out] in the file is [out, in] in torch order; element (r, c) is at r * ne0 + c.
    const TensorView& wk = m->tensor("layers.0.attention.wk");
    CHECK(wk.shape == std::vector<int64_t>{4, 8});
    CHECK(wk.source_name == "blk.0.attn_k.weight");
    CHECK(wk.rope_heads == 0);
    const std::vector<float> v = wk.to_f32();
    CHECK(v[3 * 8 + 5] == 3.0f + float(3 * 8 + 5) / 1024.0f);  // tensor index 3 in the fixture
    CHECK(m->tensor("tok_embeddings").shape == std::vector<int64_t>{258, 8});
    CHECK(m->tensor("layers.0.feed_forward.w2").shape == std::vector<int64_t>{8, 16});
    CHECK(m->tensor("tok_embeddings").file_offset % 32 == 0);
    // The vocabulary arrived too: plain text encodes to byte tokens.
    CHECK(m->tokenizer.vocab_size() == 258);
    CHECK(m->tokenizer.encode("A") == std::vector<int32_t>{int32_t('A')});
    CHECK(m->tokenizer.special_id("<|end_of_text|>") == 257);
}

TEST_CASE("GGUF metadata of every value type, arrays and alignment parse", "[gguf]") {
    TinyGguf g = tiny_llama();
    using test::GgufBytes;
    g.kv.push_back({"x.u8", [](GgufBytes& o) { o.put<uint32_t>(0), o.put<uint8_t>(200); }});
    g.kv.push_back({"x.i8", [](GgufBytes& o) { o.put<uint32_t>(1), o.put<int8_t>(-5); }});
    g.kv.push_back({"x.u16", [](GgufBytes& o) { o.put<uint32_t>(2), o.put<uint16_t>(60000); }});
    g.kv.push_back({"x.i16", [](GgufBytes& o) { o.put<uint32_t>(3), o.put<int16_t>(-300); }});
    g.kv.push_back({"x.bool", [](GgufBytes& o) { o.put<uint32_t>(7), o.put<uint8_t>(1); }});
    g.kv.push_back({"x.u64", [](GgufBytes& o) { o.put<uint32_t>(10), o.put<uint64_t>(uint64_t(1) << 40); }});
    g.kv.push_back({"x.i64", [](GgufBytes& o) { o.put<uint32_t>(11), o.put<int64_t>(-(int64_t(1) << 40)); }});
    g.kv.push_back({"x.f64", [](GgufBytes& o) { o.put<uint32_t>(12), o.put<double>(0.125); }});
    g.kv.push_back({"x.nested", [](GgufBytes& o) {
                        o.put<uint32_t>(9), o.put<uint32_t>(9), o.put<uint64_t>(2);  // array of 2 arrays
                        o.put<uint32_t>(6), o.put<uint64_t>(1), o.put<float>(1.5f);
                        o.put<uint32_t>(5), o.put<uint64_t>(2), o.put<int32_t>(-1), o.put<int32_t>(7);
                    }});
    const std::string bytes = g.build();
    const auto f = gguf::parse(std::as_bytes(std::span(bytes.data(), bytes.size())), "mem.gguf");
    CHECK(f.find("x.u8")->u == 200);
    CHECK(f.find("x.i8")->i == -5);
    CHECK(f.find("x.u16")->u == 60000);
    CHECK(f.find("x.i16")->i == -300);
    CHECK(f.find("x.bool")->u == 1);
    CHECK(f.find("x.u64")->u == uint64_t(1) << 40);
    CHECK(f.find("x.i64")->i == -(int64_t(1) << 40));
    CHECK(f.find("x.f64")->f == 0.125);
    const gguf::Value* nested = f.find("x.nested");
    REQUIRE(nested->items.size() == 2);
    CHECK(nested->items[0].floats == std::vector<double>{1.5});
    CHECK(nested->items[1].ints == std::vector<int64_t>{-1, 7});
    CHECK(f.find("tokenizer.ggml.tokens")->strings.size() == 258);
    CHECK(f.tensors.size() == 11);
    CHECK(f.data_offset % 32 == 0);

    // A larger general.alignment moves the data section and every offset with it.
    TinyGguf a = tiny_llama();
    a.alignment = 256;
    a.set_u32("general.alignment", 256);
    const fs::path p = save(a, "align256");
    const auto m = load_gguf(p, {});
    for (const auto& [name, t] : m->tensors) {
        INFO(name);
        CHECK(t.file_offset % 256 == 0);
    }
    CHECK(m->tensor("layers.0.attention.wk").to_f32()[13] == 3.0f + 13.0f / 1024.0f);
    // ... and a file whose offsets do not follow it is rejected.
    TinyGguf bad = tiny_llama();
    bad.set_u32("general.alignment", 256);
    CHECK(has(load_error<FormatError>(bad, "align-mismatch"), "not a multiple of the alignment 256"));
    TinyGguf odd = tiny_llama();
    odd.set_u32("general.alignment", 24);
    CHECK(has(load_error<FormatError>(odd, "align24"), "general.alignment must be a power of two"));
}

TEST_CASE("GGUF: truncated anywhere is a FormatError naming the file", "[gguf]") {
    const std::string full = tiny_llama().build();
    const fs::path dir = test::temp_dir("gguf-trunc");
    int checked = 0;
    for (size_t cut : {size_t(0), size_t(3), size_t(8), size_t(20), size_t(23), size_t(40), size_t(200), size_t(3000),
                       full.size() / 2, full.size() - 100, full.size() - 1}) {
        const fs::path p = dir / ("cut" + std::to_string(cut) + ".gguf");
        test::write_file(p, full.substr(0, cut));
        INFO("cut at " << cut << " of " << full.size());
        try {
            load_gguf(p, {});
            FAIL("loaded a truncated file");
        } catch (const FormatError& e) {
            CHECK(has(e.what(), p.string()));
            ++checked;
        }
    }
    CHECK(checked == 11);
}

TEST_CASE("GGUF: bad magic", "[gguf]") {
    TinyGguf g = tiny_llama();
    g.magic = 0x4c4c4747;  // "GGLL"
    const std::string msg = load_error<FormatError>(g, "magic");
    CHECK(has(msg, "not a GGUF file"));
    CHECK(has(msg, "GGLL"));
}

TEST_CASE("GGUF: unsupported versions", "[gguf]") {
    TinyGguf g = tiny_llama();
    g.version = 1;
    CHECK(has(load_error<FormatError>(g, "v1"), "version 1"));
    g.version = 0x03000000;
    CHECK(has(load_error<FormatError>(g, "bigendian"), "big-endian"));
    g.version = 2;  // v2 has the same layout as v3
    CHECK(load_gguf(save(g, "v2"), {})->config.dim == 8);
}

TEST_CASE("GGUF: absurd tensor count", "[gguf]") {
    TinyGguf g = tiny_llama();
    g.tensor_count = uint64_t(1) << 60;
    const std::string msg = load_error<FormatError>(g, "tcount");
    CHECK(has(msg, "tensor count"));
    CHECK(has(msg, "absurd"));
}

TEST_CASE("GGUF: absurd metadata count", "[gguf]") {
    TinyGguf g = tiny_llama();
    g.kv_count = ~uint64_t(0);
    CHECK(has(load_error<FormatError>(g, "kvcount"), "metadata count"));
}

TEST_CASE("GGUF: absurd string length", "[gguf]") {
    TinyGguf g = tiny_llama();
    g.kv.insert(g.kv.begin(), {"general.evil", [](test::GgufBytes& o) {
                                   o.put<uint32_t>(test::kStr);
                                   o.put<uint64_t>(uint64_t(1) << 62);  // then nothing like that many bytes
                               }});
    const std::string msg = load_error<FormatError>(g, "strlen");
    CHECK(has(msg, "string length"));
    CHECK(has(msg, "general.evil"));
}

TEST_CASE("GGUF: absurd array length", "[gguf]") {
    TinyGguf g = tiny_llama();
    g.kv.insert(g.kv.begin(), {"general.big", [](test::GgufBytes& o) {
                                   o.put<uint32_t>(test::kArr), o.put<uint32_t>(test::kU64);
                                   o.put<uint64_t>(uint64_t(1) << 59);
                               }});
    const std::string msg = load_error<FormatError>(g, "arrlen");
    CHECK(has(msg, "general.big"));
    CHECK(has(msg, "cannot fit"));
}

TEST_CASE("GGUF: unknown metadata value type and duplicate keys", "[gguf]") {
    TinyGguf g = tiny_llama();
    g.kv.push_back({"general.odd", [](test::GgufBytes& o) { o.put<uint32_t>(13), o.put<uint32_t>(0); }});
    CHECK(has(load_error<FormatError>(g, "vtype"), "unknown value type 13"));
    TinyGguf d = tiny_llama();
    d.set_u32("llama.block_count", 1);
    CHECK(has(load_error<FormatError>(d, "dupkey"), "duplicate metadata key llama.block_count"));
}

TEST_CASE("GGUF: tensor data out of range", "[gguf]") {
    TinyGguf g = tiny_llama();
    g.tensor("output_norm.weight")->offset = uint64_t(1) << 40;
    const std::string msg = load_error<FormatError>(g, "range");
    CHECK(has(msg, "output_norm.weight"));
    CHECK(has(msg, "outside the file"));
}

TEST_CASE("GGUF: overlapping tensors", "[gguf]") {
    TinyGguf g = tiny_llama();
    g.tensor("blk.0.ffn_norm.weight")->offset = 0;  // on top of token_embd
    const std::string msg = load_error<FormatError>(g, "overlap");
    CHECK(has(msg, "overlap"));
    CHECK(has(msg, "token_embd.weight"));
    CHECK(has(msg, "blk.0.ffn_norm.weight"));
}

TEST_CASE("GGUF: misaligned tensor offset", "[gguf]") {
    TinyGguf g = tiny_llama();
    const uint64_t end = g.tensors[0].data.size();
    g.tensor("blk.0.attn_norm.weight")->offset = (end + 31) / 32 * 32 + 4;
    CHECK(has(load_error<FormatError>(g, "align"), "not a multiple of the alignment"));
}

TEST_CASE("GGUF: unknown tensor type id", "[gguf]") {
    for (uint32_t id : {4u, 99u}) {  // 4 was Q4_2, removed from ggml; 99 never existed
        TinyGguf g = tiny_llama();
        g.tensor("blk.0.attn_q.weight")->type = id;
        const std::string msg = load_error<FormatError>(g, "type" + std::to_string(id));
        CHECK(has(msg, "unknown ggml type id " + std::to_string(id)));
        CHECK(has(msg, "blk.0.attn_q.weight"));
    }
}

TEST_CASE("GGUF: a quantized type Strata does not read is 'not supported yet' with its type and name", "[gguf]") {
    TinyGguf g = tiny_llama(256);  // Q2_K blocks hold 256 weights: rows must be a multiple of that
    test::TinyTensor* q = g.tensor("blk.0.attn_q.weight");
    q->type = 10;                            // GGML_TYPE_Q2_K
    q->data.assign(256 * 256 / 256 * 84, '\0');  // 84 bytes per block
    const std::string msg = load_error<UnsupportedError>(g, "q2k");
    CHECK(has(msg, "not supported yet: Q2_K in blk.0.attn_q.weight"));
    // A row that is not a whole number of blocks is a lie about the type, before any support question.
    TinyGguf s = tiny_llama(8);
    s.tensor("blk.0.attn_q.weight")->type = 8;  // Q8_0: 32 per block
    CHECK(has(load_error<FormatError>(s, "q8small"), "not a multiple of the Q8_0 block size 32"));
}

TEST_CASE("GGUF: a tensor shape contradicting the config", "[gguf]") {
    TinyGguf g = tiny_llama();
    test::TinyTensor* k = g.tensor("blk.0.attn_k.weight");
    k->ne = {8, 8};  // 2 KV heads' worth of rows, but head_count_kv is 1
    k->data = test::f32_data(64, [](uint64_t) { return 0.0f; });
    const std::string msg = load_error<ModelError>(g, "shape");
    CHECK(has(msg, "layers.0.attention.wk"));
    CHECK(has(msg, "expected [4, 8], found [8, 8]"));
}

TEST_CASE("GGUF: a missing tensor", "[gguf]") {
    TinyGguf g = tiny_llama();
    g.drop("blk.0.ffn_up.weight");
    CHECK(has(load_error<ModelError>(g, "missing"), "missing tensor layers.0.feed_forward.w3"));
}

TEST_CASE("GGUF: a tensor that is not part of a Llama model", "[gguf]") {
    TinyGguf g = tiny_llama();
    g.tensors.push_back({"blk.0.attn_q.bias", {8}, 0, test::f32_data(8, [](uint64_t) { return 0.0f; }), {}});
    CHECK(has(load_error<UnsupportedError>(g, "extra"), "blk.0.attn_q.bias"));
}

TEST_CASE("GGUF: another architecture", "[gguf]") {
    TinyGguf g = tiny_llama();
    g.erase("general.architecture");
    g.set_str("general.architecture", "qwen2");
    CHECK(has(load_error<UnsupportedError>(g, "arch"), "qwen2"));
}

TEST_CASE("GGUF: missing or wrongly typed hyperparameters", "[gguf]") {
    TinyGguf g = tiny_llama();
    g.erase("llama.block_count");
    CHECK(has(load_error<FormatError>(g, "nolayers"), "missing metadata llama.block_count"));
    TinyGguf t = tiny_llama();
    t.erase("llama.embedding_length");
    t.set_str("llama.embedding_length", "eight");
    CHECK(has(load_error<FormatError>(t, "strdim"), "llama.embedding_length must be an integer, found string"));
}

TEST_CASE("GGUF: no tokenizer", "[gguf]") {
    TinyGguf g = tiny_llama();
    g.erase("tokenizer.ggml.tokens");
    CHECK(has(load_error<TokenizerError>(g, "notok"), "no tokenizer"));
    TinyGguf s = tiny_llama();
    s.erase("tokenizer.ggml.model");
    s.set_str("tokenizer.ggml.model", "llama");  // SentencePiece (Llama 2)
    CHECK(has(load_error<TokenizerError>(s, "spm"), "\"llama\""));
}

TEST_CASE("GGUF: rope_freqs of the wrong length", "[gguf]") {
    TinyGguf g = tiny_llama();
    g.tensors.push_back({"rope_freqs.weight", {3}, 0, test::f32_data(3, [](uint64_t) { return 1.0f; }), {}});
    CHECK(has(load_error<ModelError>(g, "ropefreqs"), "expected head_dim / 2 = 2"));
    TinyGguf ok = tiny_llama();
    ok.tensors.push_back({"rope_freqs.weight", {2}, 0, test::f32_data(2, [](uint64_t i) { return 1.0f + 7.0f * i; }), {}});
    const auto m = load_gguf(save(ok, "ropeok"), {});
    CHECK(m->rope_freqs_factors == std::vector<float>{1.0f, 8.0f});
    CHECK_FALSE(m->has("rope_freqs"));
}

TEST_CASE("F32, F16 and BF16 tensors and an untied output round-trip through write_gguf bit for bit", "[gguf]") {
    TinyGguf g = tiny_llama();
    // Same shapes, 16-bit types: the bytes of n/2 floats are n half-precision values (any bit pattern will do).
    auto retype = [&](const char* name, uint32_t type) {
        test::TinyTensor* t = g.tensor(name);
        t->type = type;
        t->data.resize(t->data.size() / 2);
    };
    retype("token_embd.weight", 1);       // F16
    retype("blk.0.attn_v.weight", 1);     // F16
    retype("blk.0.attn_norm.weight", 30); // BF16
    g.tensors.push_back({"output.weight", {8, 258}, 0, test::f32_data(8 * 258, [](uint64_t i) { return -float(i); }), {}});
    const auto a = load_gguf(save(g, "mixed"), {});
    CHECK(a->tensor("tok_embeddings").dtype == DType::F16);
    CHECK(a->tensor("layers.0.attention_norm").dtype == DType::BF16);
    CHECK(a->tensor("layers.0.attention.wq").dtype == DType::F32);
    CHECK_FALSE(a->config.tie_embeddings);
    const fs::path out = test::temp_dir("gguf-mixed") / "again.gguf";
    write_gguf(*a, out);
    const auto b = load_gguf(out, {});
    REQUIRE(a->tensors.size() == b->tensors.size());
    for (const auto& [name, ta] : a->tensors) {
        INFO(name);
        const TensorView& tb = b->tensor(name);
        CHECK(ta.dtype == tb.dtype);
        CHECK(ta.shape == tb.shape);
        REQUIRE(ta.nbytes == tb.nbytes);
        CHECK(std::memcmp(ta.data, tb.data, ta.nbytes) == 0);
    }
    CHECK_FALSE(b->config.tie_embeddings);
    CHECK(b->config.hidden_dim == 16);
    CHECK(b->config.eos_ids == a->config.eos_ids);
    CHECK(b->tokenizer.vocab_size() == 258);
    CHECK(b->tokenizer.special_id("<|begin_of_text|>") == 256);
}
