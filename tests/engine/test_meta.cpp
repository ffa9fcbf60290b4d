// Meta checkpoints: the pickle reader against opcodes assembled by hand, the zip reader against archives assembled
// by hand, a whole hand-made Meta folder, and every kind of bad input with its own typed error naming the file.
#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

#include "catch.hpp"
#include "support.hpp"
#include "test_meta_fixture.hpp"

#include "../../engine/src/checkpoint/pickle.hpp"
#include "../../engine/src/checkpoint/torch_zip.hpp"
#include "strata/error.hpp"
#include "strata/model.hpp"

namespace fs = std::filesystem;
using namespace strata;
using test::MetaTensor;
using test::ZipMember;

namespace {

std::span<const std::byte> as_bytes(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }

bool has(const std::string& msg, const std::string& part) { return msg.find(part) != std::string::npos; }

// A tiny Llama in Meta's form: dim 8, 1 layer, 2 heads : 1 KV head, FFN 32 (multiple_of 16), a 256-byte rank file
// (Meta's code adds 256 specials: vocab 512). wk and wv share one storage at different offsets.
struct TinyMeta {
    nlohmann::json params = {{"dim", 8},          {"n_layers", 1},       {"n_heads", 2},    {"n_kv_heads", 1},
                             {"vocab_size", 512}, {"multiple_of", 16},   {"norm_eps", 1e-5}, {"rope_theta", 500000.0},
                             {"use_scaled_rope", false}};
    std::vector<MetaTensor> tensors;
    std::map<std::string, std::string> storages;  // key -> bytes
    std::map<std::string, int64_t> numel_override;
    std::string storage_class = "FloatStorage";
    std::string pickle_override;  // when set, used instead of meta_pickle
    uint16_t pickle_method = 0;
    bool with_tokenizer = true;
    std::vector<std::string> drop_members;

    std::string pickle() const {
        if (!pickle_override.empty()) return pickle_override;
        return test::meta_pickle(
            tensors,
            [&](const std::string& key) {
                auto it = numel_override.find(key);
                if (it != numel_override.end()) return it->second;
                auto s = storages.find(key);
                return s == storages.end() ? int64_t(64) : int64_t(s->second.size() / 4);
            },
            storage_class);
    }

    std::string pth() const {
        std::vector<ZipMember> m{{"tiny/data.pkl", pickle(), pickle_method}, {"tiny/byteorder", "little", 0}};
        for (const auto& [key, bytes] : storages) m.push_back({"tiny/data/" + key, bytes, 0});
        m.push_back({"tiny/version", "3\n", 0});
        std::erase_if(m, [&](const ZipMember& z) {
            return std::find(drop_members.begin(), drop_members.end(), z.name) != drop_members.end();
        });
        return test::build_zip(m);
    }

    fs::path write(const std::string& tag) const {
        const fs::path dir = test::temp_dir("meta-" + tag) / tag;
        fs::create_directories(dir);
        test::write_file(dir / "params.json", params.dump());
        test::write_file(dir / "consolidated.00.pth", pth());
        if (with_tokenizer) {
            static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
            std::string ranks;
            for (int b = 0; b < 256; ++b)
                ranks += std::string{k[b >> 2], k[(b & 3) << 4], '=', '='} + " " + std::to_string(b) + "\n";
            test::write_file(dir / "tokenizer.model", ranks);
        }
        return dir;
    }
};

std::string f32(int64_t n, float base) {
    std::string s(size_t(n) * 4, '\0');
    for (int64_t i = 0; i < n; ++i) {
        const float v = base + float(i) / 1024.0f;
        std::memcpy(s.data() + 4 * i, &v, 4);
    }
    return s;
}

TinyMeta tiny_meta(bool tied = true) {
    TinyMeta t;
    int key = 0;
    auto add = [&](const std::string& name, std::vector<int64_t> shape) {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        const std::string k = std::to_string(key);
        t.storages[k] = f32(n, float(key));
        ++key;
        t.tensors.push_back({name, shape, k, 0});
    };
    add("tok_embeddings.weight", {512, 8});
    add("layers.0.attention.wq.weight", {8, 8});
    t.storages["kv"] = f32(64, 100.0f);  // wk: elements 0..31, wv: 32..63
    t.tensors.push_back({"layers.0.attention.wk.weight", {4, 8}, "kv", 0});
    t.tensors.push_back({"layers.0.attention.wv.weight", {4, 8}, "kv", 32});
    add("layers.0.attention.wo.weight", {8, 8});
    add("layers.0.feed_forward.w1.weight", {32, 8});
    add("layers.0.feed_forward.w2.weight", {8, 32});
    add("layers.0.feed_forward.w3.weight", {32, 8});
    add("layers.0.attention_norm.weight", {8});
    add("layers.0.ffn_norm.weight", {8});
    add("norm.weight", {8});
    if (!tied) add("output.weight", {512, 8});
    return t;
}

template <typename E>
std::string load_error(const TinyMeta& t, const std::string& tag, bool name_pth = true) {
    const fs::path dir = t.write(tag);
    try {
        load_meta(dir, {});
    } catch (const E& e) {
        const std::string msg = e.what();
        INFO(msg);
        CHECK(has(msg, name_pth ? (dir / "consolidated.00.pth").string() : dir.string()));
        return msg;
    } catch (const std::exception& e) {
        FAIL("wrong exception type: " << e.what());
    }
    FAIL("no exception for " << tag);
    return {};
}

template <typename E, typename F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const E& e) {
        return e.what();
    } catch (const std::exception& e) {
        FAIL("wrong exception type: " << e.what());
    }
    FAIL("no exception");
    return {};
}

}  // namespace

TEST_CASE("pickle reader: a state dict assembled opcode by opcode", "[meta]") {
    const TinyMeta t = tiny_meta();
    const std::string p = t.pickle();
    const auto records = pickle::read_state_dict(as_bytes(p), "hand.pkl");
    REQUIRE(records.size() == t.tensors.size());
    for (size_t i = 0; i < records.size(); ++i) {
        INFO(t.tensors[i].name);
        CHECK(records[i].name == t.tensors[i].name);  // insertion order kept
        CHECK(records[i].shape == t.tensors[i].shape);
        CHECK(records[i].storage.key == t.tensors[i].storage_key);
        CHECK(records[i].storage.dtype == DType::F32);
        CHECK(records[i].storage.location == "cpu");
        CHECK(records[i].storage_offset == t.tensors[i].storage_offset);
    }
    CHECK(records[0].storage.numel == 512 * 8);
    CHECK(records[0].stride == std::vector<int64_t>{8, 1});
    CHECK(records[3].storage_offset == 32);  // wv inside the shared storage
    CHECK(records[8].stride == std::vector<int64_t>{1});
}

TEST_CASE("pickle reader: integers of every encoding, and the pickle writer read back", "[meta]") {
    // {'t': _rebuild_tensor_v2(storage(numel=...), offset, size, stride, False, OrderedDict())} with LONG1 and BININT
    // values, including a 5-byte LONG1 and a negative BININT rejected as a size.
    auto one = [](auto&& write_numel, auto&& write_dim) {
        test::PickleBytes p;
        p.proto(2);
        p.op('}');
        p.short_unicode("t");
        p.global("torch._utils", "_rebuild_tensor_v2");
        p.op('(');
        p.op('(');
        p.short_unicode("storage");
        p.global("torch", "BFloat16Storage");
        p.short_unicode("k");
        p.short_unicode("cpu");
        write_numel(p);
        p.op('t');
        p.op('Q');
        p.integer(0);
        write_dim(p);
        p.op(0x85);
        p.integer(1);
        p.op(0x85);
        p.op(0x89);
        p.op('N');  // backward_hooks may be anything; None here
        p.op('t');
        p.op('R');
        p.op('s');
        p.op('.');
        return p.b;
    };
    const std::string big = one([](test::PickleBytes& p) { p.long1({0x00, 0x00, 0x00, 0x00, 0x01}); },  // 2^32
                                [](test::PickleBytes& p) { p.op('J'), p.le<int32_t>(70000); });
    const auto r = pickle::read_state_dict(as_bytes(big), "big.pkl");
    REQUIRE(r.size() == 1);
    CHECK(r[0].storage.numel == int64_t(1) << 32);
    CHECK(r[0].storage.dtype == DType::BF16);
    CHECK(r[0].shape == std::vector<int64_t>{70000});
    const std::string neg = one([](test::PickleBytes& p) { p.integer(4); },
                                [](test::PickleBytes& p) { p.op('J'), p.le<int32_t>(-3); });
    CHECK(has(error_of<FormatError>([&] { pickle::read_state_dict(as_bytes(neg), "neg.pkl"); }), "negative value -3"));

    // The writer's output, read back (the reader was validated on hand-made opcodes above).
    const std::vector<pickle::WriteTensor> w{{"a.weight", DType::BF16, "0", {3, 5}},
                                             {"b.weight", DType::F16, "1", {7}},
                                             {"c.weight", DType::F32, "2", {100000, 70000}}};
    const std::string bytes = pickle::write_state_dict(w);
    const auto back = pickle::read_state_dict(as_bytes(bytes), "written.pkl");
    REQUIRE(back.size() == 3);
    CHECK(back[0].name == "a.weight");
    CHECK(back[0].stride == std::vector<int64_t>{5, 1});
    CHECK(back[1].storage.dtype == DType::F16);
    CHECK(back[2].storage.numel == int64_t(100000) * 70000);  // beyond int32: LONG1
    CHECK(back[2].shape == std::vector<int64_t>{100000, 70000});
    CHECK(bytes.substr(0, 2) == std::string("\x80\x02", 2));
}

TEST_CASE("zip reader: CRC-32 check value, Zip64 archives, alignment", "[meta]") {
    CHECK(torch_zip::crc32(0, "123456789", 9) == 0xCBF43926u);  // the standard check value
    const fs::path p = test::temp_dir("zip64") / "z.zip";
    {
        torch_zip::Writer w(p, /*force_zip64=*/true);
        w.add("a/data.pkl", "pickle");
        w.add("a/data/0", std::string(1000, 'x'));
        w.finish();
    }
    const MappedFile f(p);
    const torch_zip::Archive z(f.bytes(), p.string());
    REQUIRE(z.members().size() == 2);
    const torch_zip::Member* m = z.find("a/data/0");
    REQUIRE(m);
    CHECK(m->size == 1000);
    CHECK(z.data_offset(*m) % 64 == 0);
    const auto d = z.data(*m);
    CHECK(std::string(reinterpret_cast<const char*>(d.data()), d.size()) == std::string(1000, 'x'));
    CHECK(m->crc32 == test::crc32_bitwise(std::string(1000, 'x')));
    // The hand-built (non-Zip64) archive reads too.
    const std::string hand = test::build_zip({{"x/y", "hello", 0}});
    const torch_zip::Archive h(as_bytes(hand), "hand.zip");
    CHECK(h.members().at(0).name == "x/y");
    CHECK(h.members().at(0).crc32 == test::crc32_bitwise("hello"));
}

TEST_CASE("a Meta folder assembled by hand loads: config, views into shared storages, tied output", "[meta]") {
    const TinyMeta t = tiny_meta();
    const fs::path dir = t.write("tiny");
    const auto m = load_meta(dir, {});
    const ModelConfig& c = m->config;
    CHECK(m->format == CheckpointFormat::Meta);
    CHECK(c.dim == 8);
    CHECK(c.n_layers == 1);
    CHECK(c.n_heads == 2);
    CHECK(c.n_kv_heads == 1);
    CHECK(c.head_dim == 4);
    CHECK(c.hidden_dim == 32);  // int(2*32/3) = 21, rounded up to 16's multiple
    CHECK(c.vocab_size == 512);
    CHECK(c.max_seq_len == 8192);
    CHECK_FALSE(c.rope_scaling.enabled);
    CHECK(c.tie_embeddings);
    CHECK(c.bos_id == 256);  // <|begin_of_text|> right after the 256 ranks
    CHECK(c.eos_ids == std::vector<int32_t>{257});
    CHECK(c.name == "tiny");
    const std::vector<float> wv = m->tensor("layers.0.attention.wv").to_f32();
    CHECK(wv[0] == 100.0f + 32.0f / 1024.0f);  // offset 32 into the shared storage
    CHECK(m->tensor("layers.0.attention.wk").to_f32()[5] == 100.0f + 5.0f / 1024.0f);
    CHECK(m->tensor("layers.0.feed_forward.w2").shape == std::vector<int64_t>{8, 32});
    CHECK(m->tensor("norm").to_f32()[7] == 8.0f + 7.0f / 1024.0f);  // the 9th storage: key "8"
    CHECK(m->tensor("tok_embeddings").source_name == "tok_embeddings.weight");
    CHECK(m->tokenizer.vocab_size() == 512);
    CHECK(m->tokenizer.encode("hi") == std::vector<int32_t>{'h', 'i'});

    const auto untied = load_meta(tiny_meta(false).write("untied"), {});
    CHECK_FALSE(untied->config.tie_embeddings);
    CHECK(untied->has("output"));

    TinyMeta scaled = tiny_meta();
    scaled.params["use_scaled_rope"] = true;
    scaled.params["rope_scaling_factor"] = 32.0;
    scaled.params["ffn_dim_multiplier"] = 1.5;  // int(1.5 * 21) = 31 -> 32
    const auto s = load_meta(scaled.write("scaled"), {});
    CHECK(s->config.rope_scaling.enabled);
    CHECK(s->config.rope_scaling.factor == 32.0f);
    CHECK(s->config.rope_scaling.high_freq_factor == 4.0f);
    CHECK(s->config.max_seq_len == 131072);
    CHECK(s->config.hidden_dim == 32);
}

TEST_CASE("Meta: truncated .pth", "[meta]") {
    const TinyMeta t = tiny_meta();
    const std::string full = t.pth();
    const fs::path dir = t.write("trunc");
    int checked = 0;
    for (size_t cut : {size_t(0), size_t(10), size_t(100), full.size() / 2, full.size() - 30, full.size() - 1}) {
        INFO("cut at " << cut << " of " << full.size());
        test::write_file(dir / "consolidated.00.pth", full.substr(0, cut));
        const std::string msg = error_of<FormatError>([&] { load_meta(dir, {}); });
        CHECK(has(msg, (dir / "consolidated.00.pth").string()));
        ++checked;
    }
    CHECK(checked == 6);
    // The directory survives but points a member's local header past the end of the file.
    std::string bad = full;
    const size_t end = bad.rfind(std::string("\x50\x4b\x05\x06", 4));
    REQUIRE(end != std::string::npos);
    uint32_t cd_off;
    std::memcpy(&cd_off, bad.data() + end + 16, 4);
    const size_t name_at = bad.find("tiny/data/0", cd_off);
    REQUIRE(name_at != std::string::npos);
    const uint32_t huge = 0x7fffffff;
    std::memcpy(bad.data() + name_at - 46 + 42, &huge, 4);  // the entry's local header offset
    test::write_file(dir / "consolidated.00.pth", bad);
    CHECK(has(error_of<FormatError>([&] { load_meta(dir, {}); }), "no local file header"));
}

TEST_CASE("Meta: bad zip central directory", "[meta]") {
    const std::string full = tiny_meta().pth();
    const fs::path dir = tiny_meta().write("badcd");
    const fs::path pth = dir / "consolidated.00.pth";
    const size_t end = full.rfind(std::string("\x50\x4b\x05\x06", 4));
    REQUIRE(end != std::string::npos);
    // 1. a central directory entry with a broken signature
    std::string a = full;
    uint32_t cd_off;
    std::memcpy(&cd_off, a.data() + end + 16, 4);
    a[cd_off] = 'X';
    test::write_file(pth, a);
    CHECK(has(error_of<FormatError>([&] { load_meta(dir, {}); }), "bad central directory entry 0"));
    // 2. an entry count the directory cannot hold
    std::string b = full;
    const uint16_t many = 60000;
    std::memcpy(b.data() + end + 10, &many, 2);
    test::write_file(pth, b);
    CHECK(has(error_of<FormatError>([&] { load_meta(dir, {}); }), "claims 60000 entries"));
    // 3. a directory offset beyond the end record
    std::string c = full;
    const uint32_t far = 0x7ffffff0;
    std::memcpy(c.data() + end + 16, &far, 4);
    test::write_file(pth, c);
    CHECK(has(error_of<FormatError>([&] { load_meta(dir, {}); }), "central directory"));
    // 4. no end record at all
    test::write_file(pth, std::string(4096, 'z'));
    const std::string msg = error_of<FormatError>([&] { load_meta(dir, {}); });
    CHECK(has(msg, "no zip end-of-central-directory record"));
    CHECK(has(msg, pth.string()));
}

TEST_CASE("Meta: a compressed member", "[meta]") {
    TinyMeta t = tiny_meta();
    t.pickle_method = 8;  // claims deflate
    const std::string msg = load_error<FormatError>(t, "deflate");
    CHECK(has(msg, "tiny/data.pkl is compressed (deflate)"));
}

TEST_CASE("Meta: a pickle with an unexpected opcode", "[meta]") {
    TinyMeta t = tiny_meta();
    std::string p = t.pickle();
    p.insert(2, 1, char(0x93));  // STACK_GLOBAL (protocol 4), right after PROTO 2
    t.pickle_override = p;
    const std::string msg = load_error<FormatError>(t, "opcode");
    CHECK(has(msg, "unexpected pickle opcode 0x93 at offset 2 in"));
    CHECK(has(msg, "tiny/data.pkl"));
}

TEST_CASE("Meta: a pickle that calls something else", "[meta]") {
    TinyMeta t = tiny_meta();
    test::PickleBytes p;
    p.proto(2);
    p.global("os", "system");
    p.short_unicode("true");
    p.op(0x85);
    p.op('R');
    p.op('.');
    t.pickle_override = p.b;
    CHECK(has(load_error<FormatError>(t, "global"), "unexpected global \"os system\""));
}

TEST_CASE("Meta: truncated or malformed pickles", "[meta]") {
    const std::string good = tiny_meta().pickle();
    for (size_t cut : {size_t(0), size_t(1), size_t(2), size_t(50), good.size() / 2, good.size() - 1}) {
        INFO("cut " << cut);
        const std::string msg = error_of<FormatError>(
            [&] { pickle::read_state_dict(as_bytes(good.substr(0, cut)), "cut.pkl"); });
        CHECK(has(msg, "cut.pkl"));
    }
    CHECK(has(error_of<FormatError>([] { pickle::read_state_dict(as_bytes(std::string("\x80\x02t.", 4)), "m.pkl"); }),
              "no MARK"));
    CHECK(has(error_of<FormatError>([] { pickle::read_state_dict(as_bytes(std::string("\x80\x02h\x07.", 5)), "m.pkl"); }),
              "memo key 7"));
    CHECK(has(error_of<FormatError>([] { pickle::read_state_dict(as_bytes(std::string("\x80\x02s.", 4)), "m.pkl"); }),
              "underflow"));
    CHECK(has(error_of<FormatError>([] { pickle::read_state_dict(as_bytes(std::string("\x80\x02].", 4)), "m.pkl"); }),
              "not a state dict"));
}

TEST_CASE("Meta: a storage member that is missing", "[meta]") {
    TinyMeta t = tiny_meta();
    t.drop_members = {"tiny/data/kv"};
    const std::string msg = load_error<FormatError>(t, "nostorage");
    CHECK(has(msg, "layers.0.attention.wk.weight"));
    CHECK(has(msg, "no member tiny/data/kv"));
}

TEST_CASE("Meta: a storage smaller than its tensors", "[meta]") {
    TinyMeta t = tiny_meta();
    t.numel_override["kv"] = 40;  // wv needs elements 32..63
    CHECK(has(load_error<FormatError>(t, "small"), "lie outside its storage of 40"));
    TinyMeta u = tiny_meta();
    u.numel_override["kv"] = 1 << 20;  // claims far more than the member holds
    CHECK(has(load_error<FormatError>(u, "lying"), "member tiny/data/kv has 256 bytes"));
}

TEST_CASE("Meta: a non-contiguous tensor", "[meta]") {
    TinyMeta t = tiny_meta();
    // Hand-edit: the transposed view of wq, stride (1, 8).
    std::string p = t.pickle();
    const std::string name = "layers.0.attention.wq.weight";
    size_t at = p.find(name);
    REQUIRE(at != std::string::npos);
    // stride tuple of wq: LONG1 8, BININT1 1, TUPLE2 -> LONG1 1, BININT1 8
    const std::string stride("\x8a\x01\x08K\x01\x86", 6);
    at = p.find(stride, at);
    REQUIRE(at != std::string::npos);
    p.replace(at, stride.size(), std::string("\x8a\x01\x01K\x08\x86", 6));
    t.pickle_override = p;
    const std::string msg = load_error<UnsupportedError>(t, "strided");
    CHECK(has(msg, "not contiguous"));
    CHECK(has(msg, "stride [1, 8]"));
}

TEST_CASE("Meta: an unsupported storage type", "[meta]") {
    TinyMeta t = tiny_meta();
    t.storage_class = "DoubleStorage";
    CHECK(has(load_error<UnsupportedError>(t, "double"), "DoubleStorage"));
}

TEST_CASE("Meta: more than one shard", "[meta]") {
    const TinyMeta t = tiny_meta();
    const fs::path dir = t.write("shards");
    test::write_file(dir / "consolidated.01.pth", t.pth());
    const std::string msg = error_of<UnsupportedError>([&] { load_meta(dir, {}); });
    CHECK(has(msg, dir.string()));
    CHECK(has(msg, "2 shards"));
    CHECK(has(msg, "single-shard"));
}

TEST_CASE("Meta: a shape contradicting params.json", "[meta]") {
    TinyMeta t = tiny_meta();
    t.params["n_kv_heads"] = 2;  // wk/wv then need 8 rows, the file has 4
    const std::string msg = load_error<ModelError>(t, "shape");
    CHECK(has(msg, "layers.0.attention.wk"));
    CHECK(has(msg, "expected [8, 8], found [4, 8]"));
}

TEST_CASE("Meta: a missing tensor", "[meta]") {
    TinyMeta t = tiny_meta();
    std::erase_if(t.tensors, [](const MetaTensor& x) { return x.name == "layers.0.ffn_norm.weight"; });
    CHECK(has(error_of<ModelError>([&] { load_meta(t.write("missing"), {}); }), "missing tensor layers.0.ffn_norm"));
}

TEST_CASE("Meta: missing tokenizer, params or weights", "[meta]") {
    TinyMeta t = tiny_meta();
    t.with_tokenizer = false;
    const fs::path d1 = t.write("notok");
    CHECK(has(error_of<TokenizerError>([&] { load_meta(d1, {}); }), "tokenizer.model"));
    const fs::path d2 = tiny_meta().write("noparams");
    fs::remove(d2 / "params.json");
    CHECK(has(error_of<FormatError>([&] { load_meta(d2, {}); }), "no model in " + d2.string()));
    const fs::path d3 = tiny_meta().write("nopth");
    fs::remove(d3 / "consolidated.00.pth");
    CHECK(has(error_of<FormatError>([&] { load_meta(d3, {}); }), "no consolidated.00.pth"));
    TinyMeta p = tiny_meta();
    p.params.erase("dim");
    const fs::path d4 = p.write("nodim");
    CHECK(has(error_of<FormatError>([&] { load_meta(d4, {}); }), "params.json: missing \"dim\""));
    TinyMeta q = tiny_meta();
    q.params["n_layers"] = "one";
    const fs::path d5 = q.write("strlayers");
    CHECK(has(error_of<FormatError>([&] { load_meta(d5, {}); }), "\"n_layers\" must be an integer"));
}
