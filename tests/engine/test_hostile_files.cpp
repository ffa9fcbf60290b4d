// Files built to hurt: each costs a reader memory, stack or time out of all proportion to its size unless the
// reader bounds it. Before the bounds, these asked for tens of GB (the pickles), overflowed the stack (the deep
// JSON: a segfault in nlohmann's dump() or our own recursive walks) or ran for minutes (the zip). Now each is a
// clear error naming the file, quickly.
#include <chrono>

#include <nlohmann/json.hpp>

#include "catch.hpp"
#include "support.hpp"
#include "test_huggingface_fixture.hpp"
#include "test_meta_fixture.hpp"

#include "../../engine/src/checkpoint/pickle.hpp"
#include "../../engine/src/checkpoint/torch_zip.hpp"
#include "strata/error.hpp"
#include "strata/model.hpp"
#include "strata/npy.hpp"
#include "strata/tokenizer.hpp"

namespace fs = std::filesystem;
using namespace strata;
using Catch::Contains;
using test::PickleBytes;

namespace {

std::span<const std::byte> as_bytes(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }

using test::hf::error_of;  // the fixture's: runs f, expects an E, returns its message

std::string pickle_error(const std::string& p) {
    return error_of<FormatError>([&] { pickle::read_state_dict(as_bytes(p), "hostile.pkl"); });
}

std::string deep(int levels, const std::string& leaf = "1") { return std::string(levels, '[') + leaf + std::string(levels, ']'); }

}  // namespace

// ---------------------------------------------------------------------------------------------- pickle

TEST_CASE("hostile pickles: one large object named many times through the memo is never copied", "[hostile]") {
    const auto t0 = std::chrono::steady_clock::now();
    {
        // A 1 MiB storage key, memoized once in the persistent id and named by 20,000 BINPERSIDs: 20 GB of copies
        // before, refused at the first now.
        PickleBytes p;
        p.proto(2);
        p.op('(');
        p.short_unicode("storage");
        p.global("torch", "FloatStorage");
        p.unicode(std::string(1 << 20, 'k'));
        p.short_unicode("cpu");
        p.integer(4);
        p.op('t');
        p.long_binput(7);
        for (int i = 0; i < 20000; ++i) p.long_binget(7), p.op('Q');
        p.op('.');
        CHECK_THAT(pickle_error(p.b), Contains("longer than 256 bytes") && Contains("hostile.pkl"));
    }
    {
        // A size tuple of 100,000 ints named by 20,000 _rebuild_tensor_v2 calls: 32 GB of shape vectors before.
        PickleBytes p;
        p.proto(2);
        p.global("torch._utils", "_rebuild_tensor_v2");
        p.long_binput(1);
        p.op('(');
        p.short_unicode("storage");
        p.global("torch", "FloatStorage");
        p.short_unicode("0");
        p.short_unicode("cpu");
        p.integer(4);
        p.op('t');
        p.op('Q');
        p.long_binput(2);  // the storage
        p.op('(');
        for (int i = 0; i < 100000; ++i) p.integer(1);
        p.op('t');
        p.long_binput(3);  // the huge size tuple
        for (int i = 0; i < 20000; ++i) {
            p.long_binget(1);
            p.op('(');
            p.long_binget(2), p.integer(0), p.long_binget(3), p.long_binget(3);
            p.op('t');
            p.op('R');
        }
        p.op('.');
        CHECK_THAT(pickle_error(p.b), Contains("dimensions (at most 8)"));
    }
    {
        // A 1 MiB string used as the key of 20,000 state dict entries, all one memoized tensor: 20 GB of names
        // before.
        PickleBytes p;
        p.proto(2);
        p.global("torch._utils", "_rebuild_tensor_v2");
        p.op('(');
        p.op('(');
        p.short_unicode("storage");
        p.global("torch", "FloatStorage");
        p.short_unicode("0");
        p.short_unicode("cpu");
        p.integer(4);
        p.op('t');
        p.op('Q');
        p.integer(0);
        p.integer(4), p.op(0x85);  // size (4,)
        p.integer(1), p.op(0x85);  // stride (1,)
        p.op('t');
        p.op('R');
        p.long_binput(2);  // the tensor
        p.unicode(std::string(1 << 20, 'n'));
        p.long_binput(1);
        p.op('}');
        p.op('(');
        for (int i = 0; i < 20000; ++i) p.long_binget(1), p.long_binget(2);
        p.op('u');
        p.op('.');
        CHECK_THAT(pickle_error(p.b), Contains("bytes long (at most 1024)"));
    }
    {
        // Two million one-byte objects (EMPTY_TUPLE): 160 MB of objects from 2 MB before; capped at 2^20 now.
        PickleBytes p;
        p.proto(2);
        p.b.append(size_t(2) << 20, ')');
        p.op('.');
        CHECK_THAT(pickle_error(p.b), Contains("more than 1048576 objects"));
    }
    {
        // A pickle far larger than any state dict's is refused before it runs.
        const std::string huge(size_t(17) << 20, 'N');
        CHECK_THAT(pickle_error(huge), Contains("far larger than any state dict"));
    }
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20));
}

// ---------------------------------------------------------------------------------------------- zip

TEST_CASE("hostile zips: many members are found by name, and damaged small members fail their CRC", "[hostile]") {
    // 60,000 members: a linear scan per lookup made finding all of them 1.8e9 name comparisons.
    std::vector<test::ZipMember> members;
    for (int i = 0; i < 60000; ++i) members.push_back({"a/data/" + std::to_string(i), "", 0});
    const std::string zip = test::build_zip(members);
    const torch_zip::Archive archive(as_bytes(zip), "many.pth");
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 60000; ++i) REQUIRE(archive.find("a/data/" + std::to_string(i)) != nullptr);
    CHECK(archive.find("a/data/60000") == nullptr);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));

    // A flipped byte in data.pkl is reported as damage, not parsed.
    std::string damaged = test::build_zip({{"a/data.pkl", "\x80\x02}.", 0}, {"a/byteorder", "little", 0}});
    const size_t at = damaged.find("\x80\x02}.");
    REQUIRE(at != std::string::npos);
    damaged[at + 2] = ']';
    const torch_zip::Archive bad(as_bytes(damaged), "damaged.pth");
    CHECK_THAT(error_of<FormatError>([&] { bad.checked_data(*bad.find("a/data.pkl")); }),
               Contains("damaged.pth") && Contains("a/data.pkl is damaged") && Contains("CRC-32"));
    CHECK(bad.checked_data(*bad.find("a/byteorder")).size() == 6);
}

// ---------------------------------------------------------------------------------------------- JSON

TEST_CASE("deeply nested JSON in every file we read is an error naming the file, not a stack overflow",
          "[hostile]") {
    const std::string bomb = deep(300000);  // 600 KB: a few hundred thousand levels
    auto refused = [](const std::string& msg, const fs::path& file) {
        INFO(msg);
        CHECK_THAT(msg, Contains(file.string()) && Contains("nested deeper than 64"));
    };

    const fs::path dir = test::hf::write_tiny("deep-json");
    const std::string config = test::read_file(dir / "config.json");
    {  // config.json: a value nested deeply (dumped into a message before: a segfault)
        nlohmann::json c = nlohmann::json::parse(config);
        std::string text = c.dump();
        text.insert(text.size() - 1, ",\"hidden_size_extra\":" + bomb);
        test::write_file(dir / "config.json", text);
        refused(error_of<FormatError>([&] { load_model(dir); }), dir / "config.json");
        test::write_file(dir / "config.json", "{\"hidden_size\":" + bomb + "}");
        refused(error_of<FormatError>([&] { load_model(dir); }), dir / "config.json");
        test::write_file(dir / "config.json", config);
    }
    {  // generation_config.json
        test::write_file(dir / "generation_config.json", "{\"eos_token_id\":" + bomb + "}");
        refused(error_of<FormatError>([&] { load_model(dir); }), dir / "generation_config.json");
        fs::remove(dir / "generation_config.json");
    }
    {  // the shard index
        test::write_file(dir / "model.safetensors.index.json", "{\"weight_map\":" + bomb + "}");
        const std::string msg = error_of<FormatError>([&] { load_model(dir); });
        refused(msg, dir / "model.safetensors.index.json");
        fs::remove(dir / "model.safetensors.index.json");
    }
    {  // tokenizer.json: the pre_tokenizer walk recursed
        const fs::path tok = dir / "tokenizer.json";
        const std::string text = "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"pre_tokenizer\":" + bomb + "}";
        refused(error_of<TokenizerError>([&] { Tokenizer::from_hf_json_text(text, tok.string()); }), tok);
    }
    {  // a safetensors header
        const std::string header = "{\"x\":{\"dtype\":\"F32\",\"shape\":" + deep(100000, "2") + ",\"data_offsets\":[0,8]}}";
        test::write_file(dir / "model.safetensors", test::hf::safetensors_bytes(header, std::string(8, '\0')));
        refused(error_of<FormatError>([&] { load_model(dir); }), dir / "model.safetensors");
    }
    {  // params.json (Meta)
        const fs::path meta = test::temp_dir("deep-params");
        test::write_file(meta / "params.json", "{\"dim\":" + bomb + "}");
        test::write_file(meta / "consolidated.00.pth", "");
        test::write_file(meta / "tokenizer.model", "");
        refused(error_of<FormatError>([&] { load_model(meta); }), meta / "params.json");
    }
    // Brackets inside strings are not nesting: a legitimate file with many of them still loads.
    {
        nlohmann::json c = nlohmann::json::parse(config);
        c["strata_note"] = std::string(1000, '[');
        test::write_file(dir / "config.json", c.dump());
        test::write_file(dir / "model.safetensors", "");  // (fails later, at the weights: not at the JSON)
        const std::string msg = error_of<FormatError>([&] { load_model(dir); });
        CHECK_THAT(msg, !Contains("nested deeper"));
    }
}

TEST_CASE("a config value that is a huge array is described by its size, not printed", "[hostile]") {
    const fs::path dir = test::hf::write_tiny("huge-array");
    nlohmann::json c = nlohmann::json::parse(test::read_file(dir / "config.json"));
    c["hidden_size"] = std::vector<int>(200000, 7);
    test::write_file(dir / "config.json", c.dump());
    const std::string msg = error_of<FormatError>([&] { load_model(dir); });
    CHECK_THAT(msg, Contains("hidden_size") && Contains("an array of 200000 values"));
    CHECK(msg.size() < 400);
}

// ---------------------------------------------------------------------------------------------- sizes

TEST_CASE("a config or tokenizer file far larger than any of its kind is refused before it is read", "[hostile]") {
    // Sparse files: 17 MiB (config files) and 65 MiB (tokenizer files) of zeros cost no disk. Before the limit on
    // params.json, a file of any size was read whole into memory (a 50 GB "params.json" was an out-of-memory).
    auto huge = [](const fs::path& file, uintmax_t bytes) {
        test::write_file(file, "{}");
        fs::resize_file(file, bytes);
    };
    auto refused = [](const std::string& msg, const fs::path& file, const char* limit) {
        INFO(msg);
        CHECK_THAT(msg, Contains(file.string()) && Contains(std::string(limit) + "-byte limit"));
    };
    const uintmax_t over16 = (16ull << 20) + 1, over64 = (64ull << 20) + 1;
    {
        const fs::path meta = test::temp_dir("huge-params");
        huge(meta / "params.json", over16);
        test::write_file(meta / "consolidated.00.pth", "");
        test::write_file(meta / "tokenizer.model", "");
        refused(error_of<FormatError>([&] { load_model(meta); }), meta / "params.json", "16777216");
    }
    const fs::path dir = test::hf::write_tiny("huge-files");
    const std::string config = test::read_file(dir / "config.json");
    huge(dir / "config.json", over16);
    refused(error_of<FormatError>([&] { load_model(dir); }), dir / "config.json", "16777216");
    test::write_file(dir / "config.json", config);
    for (const char* name : {"generation_config.json", "model.safetensors.index.json"}) {
        huge(dir / name, over16);
        refused(error_of<FormatError>([&] { load_model(dir); }), dir / name, "16777216");
        fs::remove(dir / name);
    }
    const fs::path tok = test::temp_dir("huge-tokenizer") / "tokenizer.json";
    huge(tok, over64);
    refused(error_of<TokenizerError>([&] { Tokenizer::from_hf_json(tok); }), tok, "67108864");
}

// ---------------------------------------------------------------------------------------------- .npy

namespace {

// A version 1.0 .npy file with `header` (padded as numpy pads it) and `data`.
fs::path npy_file(const std::string& tag, std::string header, const std::string& data) {
    header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
    header += '\n';
    std::string bytes = "\x93NUMPY\x01";
    bytes += '\0';
    bytes += static_cast<char>(header.size() & 0xff);
    bytes += static_cast<char>(header.size() >> 8);
    const fs::path file = test::temp_dir("npy-" + tag) / "a.npy";
    test::write_file(file, bytes + header + data);
    return file;
}

std::string npy_header(const std::string& shape, const std::string& descr = "<f4") {
    return "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + shape + "), }";
}

}  // namespace

TEST_CASE("hostile .npy files: a bad or huge shape is an error naming the file, not an exception from the library",
          "[hostile]") {
    auto refused = [](const fs::path& file, const std::string& part) {
        const std::string msg = error_of<FormatError>([&] { read_npy(file); });
        INFO(msg);
        CHECK_THAT(msg, Contains(file.string()) && Contains(part));
        CHECK(msg.size() < 400);
    };
    const std::string four(16, '\0');
    // Found by fuzz_npy. A dimension that is not a number was std::invalid_argument from std::stoll, one too
    // large for int64 std::out_of_range, neither a strata::Error.
    refused(npy_file("word", npy_header("abc,"), four), "\"abc\" is not an integer");
    refused(npy_file("long", npy_header("99999999999999999999,"), four), "is not an integer");
    // 2^62 + 1 elements: the byte count overflowed to 4, the check passed, and the array was resized to 2^62 + 1
    // floats (std::length_error, or an out-of-memory).
    refused(npy_file("overflow", npy_header("4611686018427387905,"), four), "data truncated");
    refused(npy_file("product", npy_header("65536, 65536, 65536, 65536"), four), "data truncated");
    // A header of any length was copied into the message whole.
    refused(npy_file("descr", npy_header("1,", "<i8" + std::string(20000, 'x')), four), "float32 or float64");

    // Legitimate shapes still read: an empty array (its zero-length copy was undefined behaviour), a scalar, a
    // 3 x 0 array with no data, Python 2's "2L" dimensions.
    const NpyArray empty = read_npy(npy_file("empty", npy_header("0, 5"), ""));
    CHECK(empty.shape == std::vector<int64_t>{0, 5});
    CHECK(empty.data.empty());
    CHECK(read_npy(npy_file("three-by-zero", npy_header("3, 0"), "")).data.empty());
    const float one = 1.5f;
    const NpyArray scalar = read_npy(npy_file("scalar", npy_header(""), std::string(reinterpret_cast<const char*>(&one), 4)));
    CHECK(scalar.shape.empty());
    REQUIRE(scalar.data.size() == 1);
    CHECK(scalar.data[0] == 1.5f);
    const NpyArray py2 = read_npy(npy_file("py2", npy_header("2L, 2L"), four));
    CHECK(py2.shape == std::vector<int64_t>{2, 2});
    CHECK(py2.data.size() == 4);
}
