// Bad Hugging Face checkpoints: each gives a typed error that names the file and says what is wrong.
#include "catch.hpp"
#include "strata/error.hpp"
#include "strata/model.hpp"
#include "support.hpp"
#include "test_huggingface_fixture.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using Catch::Contains;
using namespace strata;
using namespace strata::test;
using namespace strata::test::hf;

namespace {

// A tiny model whose safetensors header is `edit`ed before writing (the data stays truthful).
template <class Edit>
fs::path with_header(const std::string& tag, Edit edit) {
    const json c = tiny_config();
    auto [h, data] = layout(tiny_tensors(c));
    edit(h, data);
    return write_folder(tag, c, safetensors_bytes(h.dump(), data));
}

std::string st(const fs::path& dir) { return (dir / "model.safetensors").string(); }

}  // namespace

TEST_CASE("bad input: safetensors file shorter than its 8-byte length", "[checkpoint]") {
    const fs::path dir = write_folder("trunc8", tiny_config(), std::string("\x10\x00\x00", 3));
    const std::string e = error_of<FormatError>([&] { load_model(dir); });
    CHECK_THAT(e, Contains(st(dir)) && Contains("truncated") && Contains("3 bytes"));
}

TEST_CASE("bad input: safetensors file truncated inside the tensor data", "[checkpoint]") {
    const json c = tiny_config();
    auto [h, data] = layout(tiny_tensors(c));
    std::string bytes = safetensors_bytes(h.dump(), data);
    bytes.resize(bytes.size() - 100);
    const fs::path dir = write_folder("trunc-data", c, bytes);
    const std::string e = error_of<FormatError>([&] { load_model(dir); });
    // The last tensor in the file now runs past the end.
    CHECK_THAT(e, Contains(st(dir)) && Contains("beyond the data section"));
}

TEST_CASE("bad input: header length beyond the file", "[checkpoint]") {
    std::string bytes = safetensors_bytes(std::string(40, ' '), "");
    bytes[0] = '\x00';
    bytes[2] = '\x10';  // 1 MiB of header claimed in a 48-byte file
    const fs::path dir = write_folder("header-len", tiny_config(), bytes);
    const std::string e = error_of<FormatError>([&] { load_model(dir); });
    CHECK_THAT(e, Contains(st(dir)) && Contains("header length 1048576 goes beyond the end of the file (48 bytes"));
}

TEST_CASE("bad input: header that is not JSON", "[checkpoint]") {
    const fs::path dir = write_folder("not-json", tiny_config(), safetensors_bytes("{\"model.norm.weight\": {", "xx"));
    const std::string e = error_of<FormatError>([&] { load_model(dir); });
    CHECK_THAT(e, Contains(st(dir)) && Contains("not valid JSON"));
}

TEST_CASE("bad input: header lying about offsets (past the end of the data)", "[checkpoint]") {
    const fs::path dir = with_header("lie-offsets", [](json& h, std::string& data) {
        h["model.norm.weight"]["data_offsets"] = {data.size() - 32, data.size() + 32};
    });
    const std::string e = error_of<FormatError>([&] { load_model(dir); });
    CHECK_THAT(e, Contains(st(dir)) && Contains("model.norm.weight") && Contains("beyond the data section"));
}

TEST_CASE("bad input: header with end before begin", "[checkpoint]") {
    const fs::path dir = with_header("end-before-begin", [](json& h, std::string&) {
        h["model.norm.weight"]["data_offsets"] = {64, 0};
    });
    const std::string e = error_of<FormatError>([&] { load_model(dir); });
    CHECK_THAT(e, Contains(st(dir)) && Contains("model.norm.weight") && Contains("end before begin"));
}

TEST_CASE("bad input: header lying about a dtype (byte count does not match)", "[checkpoint]") {
    const fs::path dir = with_header("lie-dtype", [](json& h, std::string&) {
        h["model.layers.0.self_attn.q_proj.weight"]["dtype"] = "F32";  // the bytes are BF16
    });
    const std::string e = error_of<FormatError>([&] { load_model(dir); });
    CHECK_THAT(e, Contains(st(dir)) && Contains("model.layers.0.self_attn.q_proj.weight") &&
                      Contains("F32 [16, 16] needs 1024 bytes") && Contains("hold 512"));
}

TEST_CASE("bad input: header lying about a shape (byte count does not match)", "[checkpoint]") {
    const fs::path dir = with_header("lie-shape", [](json& h, std::string&) {
        h["model.layers.1.mlp.up_proj.weight"]["shape"] = {24, 17};
    });
    const std::string e = error_of<FormatError>([&] { load_model(dir); });
    CHECK_THAT(e, Contains(st(dir)) && Contains("model.layers.1.mlp.up_proj.weight") && Contains("[24, 17]"));
}

TEST_CASE("bad input: negative and overflowing dimensions", "[checkpoint]") {
    const fs::path neg = with_header("neg-dim", [](json& h, std::string&) {
        h["model.norm.weight"]["shape"] = {-16};
    });
    CHECK_THAT(error_of<FormatError>([&] { load_model(neg); }),
               Contains(st(neg)) && Contains("model.norm.weight") && Contains("not a non-negative integer"));
    // 2^32 * 2^32 * 4 wraps to 0 in 64 bits: the check must not be fooled into accepting an empty tensor.
    const fs::path big = with_header("overflow-dim", [](json& h, std::string&) {
        h["model.norm.weight"]["shape"] = {4294967296ull, 4294967296ull, 4};
        h["model.norm.weight"]["data_offsets"] = {0, 0};
    });
    CHECK_THAT(error_of<FormatError>([&] { load_model(big); }), Contains(st(big)) && Contains("model.norm.weight"));
    // 2^31 * 2^31 F32 elements are exactly 2^64 bytes: 0 in 64-bit arithmetic, and the offsets claim 0 bytes.
    const fs::path wrap = with_header("wrap-bytes", [](json& h, std::string&) {
        h["model.norm.weight"]["shape"] = {2147483648ull, 2147483648ull};
        h["model.norm.weight"]["data_offsets"] = {0, 0};
    });
    CHECK_THAT(error_of<FormatError>([&] { load_model(wrap); }),
               Contains(st(wrap)) && Contains("model.norm.weight") && Contains("needs 18446744073709551616 bytes"));
}

TEST_CASE("bad input: overlapping tensor data", "[checkpoint]") {
    const fs::path dir = with_header("overlap", [](json& h, std::string&) {
        // Same size as the ffn norm of layer 0, but starting half-way through the attention norm.
        const uint64_t b = h["model.layers.0.input_layernorm.weight"]["data_offsets"][0].get<uint64_t>() + 32;
        h["model.layers.0.post_attention_layernorm.weight"]["data_offsets"] = {b, b + 64};
    });
    const std::string e = error_of<FormatError>([&] { load_model(dir); });
    CHECK_THAT(e, Contains(st(dir)) && Contains("overlap") && Contains("model.layers.0.input_layernorm.weight") &&
                      Contains("model.layers.0.post_attention_layernorm.weight"));
}

TEST_CASE("bad input: unknown and unsupported dtypes", "[checkpoint]") {
    const fs::path unknown = with_header("dtype-unknown", [](json& h, std::string&) {
        h["model.norm.weight"]["dtype"] = "Q17";
    });
    CHECK_THAT(error_of<UnsupportedError>([&] { load_model(unknown); }),
               Contains(st(unknown)) && Contains("model.norm.weight") && Contains("unknown dtype 'Q17'"));
    const fs::path i64 = with_header("dtype-i64", [](json& h, std::string&) {
        h["model.norm.weight"]["dtype"] = "I64";
        h["model.norm.weight"]["shape"] = {8};
    });
    CHECK_THAT(error_of<UnsupportedError>([&] { load_model(i64); }),
               Contains(st(i64)) && Contains("model.norm.weight") && Contains("I64"));
}

TEST_CASE("bad input: missing tensor", "[checkpoint]") {
    json c = tiny_config();
    auto ts = tiny_tensors(c);
    std::erase_if(ts, [](const StTensor& t) { return t.name == "model.layers.1.mlp.down_proj.weight"; });
    auto [h, data] = layout(ts);
    const fs::path dir = write_folder("missing-tensor", c, safetensors_bytes(h.dump(), data));
    CHECK_THAT(error_of<ModelError>([&] { load_model(dir); }),
               Contains(dir.string()) && Contains("missing tensor layers.1.feed_forward.w2"));
    // An untied model without lm_head.
    std::erase_if(ts, [](const StTensor& t) { return t.name == "lm_head.weight"; });
    ts.push_back(make_tensor("model.layers.1.mlp.down_proj.weight", "F16", {16, 24}, 7));
    auto [h2, data2] = layout(ts);
    const fs::path dir2 = write_folder("missing-output", c, safetensors_bytes(h2.dump(), data2));
    CHECK_THAT(error_of<ModelError>([&] { load_model(dir2); }), Contains("missing tensor output") && Contains("not tied"));
}

TEST_CASE("bad input: a tensor shape that contradicts the config", "[checkpoint]") {
    json c = tiny_config();
    auto ts = tiny_tensors(c);
    for (auto& t : ts)
        if (t.name == "model.layers.1.mlp.gate_proj.weight") t = make_tensor(t.name, "BF16", {24, 15}, 3);
    auto [h, data] = layout(ts);
    const fs::path dir = write_folder("bad-shape", c, safetensors_bytes(h.dump(), data));
    CHECK_THAT(error_of<ModelError>([&] { load_model(dir); }),
               Contains("layers.1.feed_forward.w1") && Contains("expected [24, 16], found [24, 15] in " + st(dir)));
    // More layers in the file than in the config.
    json fewer = tiny_config();
    fewer["num_hidden_layers"] = 1;
    auto [h2, data2] = layout(tiny_tensors(tiny_config()));
    const fs::path dir2 = write_folder("extra-layer", fewer, safetensors_bytes(h2.dump(), data2));
    CHECK_THAT(error_of<ModelError>([&] { load_model(dir2); }),
               Contains("layers.1.") && Contains("unexpected tensor") && Contains("1 layers"));
}

TEST_CASE("bad input: a tensor that is not part of a Llama model", "[checkpoint]") {
    const fs::path dir = with_header("foreign", [](json& h, std::string& data) {
        h["model.layers.0.self_attn.q_proj.bias"] = {{"dtype", "F32"}, {"shape", {0}}, {"data_offsets", {data.size(), data.size()}}};
    });
    CHECK_THAT(error_of<UnsupportedError>([&] { load_model(dir); }),
               Contains(st(dir)) && Contains("model.layers.0.self_attn.q_proj.bias"));
}

TEST_CASE("bad input: config.json that is not JSON, not Llama, or missing a field", "[checkpoint]") {
    const fs::path dir = write_tiny("bad-config");
    write_file(dir / "config.json", "{\"hidden_size\": 16,");
    CHECK_THAT(error_of<FormatError>([&] { load_model(dir); }), Contains((dir / "config.json").string()) && Contains("not valid JSON"));

    json c = tiny_config();
    c["architectures"] = {"MistralForCausalLM"};
    write_file(dir / "config.json", c.dump());
    CHECK_THAT(error_of<UnsupportedError>([&] { load_model(dir); }), Contains("MistralForCausalLM") && Contains("config.json"));

    c = tiny_config();
    c.erase("intermediate_size");
    write_file(dir / "config.json", c.dump());
    CHECK_THAT(error_of<FormatError>([&] { load_model(dir); }), Contains("config.json") && Contains("intermediate_size"));

    c = tiny_config();
    c["num_key_value_heads"] = 3;
    write_file(dir / "config.json", c.dump());
    CHECK_THAT(error_of<ModelError>([&] { load_model(dir); }), Contains("n_heads 4 is not a multiple of n_kv_heads 3"));

    c = tiny_config();
    c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
    write_file(dir / "config.json", c.dump());
    CHECK_THAT(error_of<UnsupportedError>([&] { load_model(dir); }), Contains("yarn"));
}

TEST_CASE("bad input: a folder with no model, and a path that does not exist", "[checkpoint]") {
    const fs::path dir = temp_dir("empty");
    write_file(dir / "notes.txt", "hello");
    CHECK_THAT(error_of<FormatError>([&] { load_model(dir); }),
               Contains("no model in " + dir.string() +
                        ": expected config.json (Hugging Face), params.json (Meta) or a .gguf file"));
    CHECK_THAT(error_of<FormatError>([&] { load_model(dir / "nowhere"); }),
               Contains((dir / "nowhere").string()) && Contains("no such file or folder"));
    CHECK_THAT(error_of<FormatError>([&] { load_model(dir / "notes.txt"); }),
               Contains((dir / "notes.txt").string()) && Contains("not a model"));
}

TEST_CASE("bad input: a config.json without weights", "[checkpoint]") {
    const fs::path dir = temp_dir("no-weights");
    write_file(dir / "config.json", tiny_config().dump());
    CHECK_THAT(error_of<FormatError>([&] { load_model(dir); }),
               Contains(dir.string()) && Contains("no weights: expected model.safetensors"));
}

TEST_CASE("bad input: missing tokenizer", "[checkpoint]") {
    // The golden weights, without tokenizer.json.
    const fs::path dir = temp_dir("no-tokenizer");
    for (const char* f : {"config.json", "generation_config.json", "model.safetensors"})
        fs::create_symlink(reference_dir() / "model" / f, dir / f);
    CHECK_THAT(error_of<TokenizerError>([&] { load_model(dir); }), Contains(dir.string()) && Contains("tokenizer.json"));
}

TEST_CASE("bad input: index.json naming a missing shard", "[checkpoint]") {
    const fs::path dir = write_tiny("missing-shard");
    json wm;
    for (const auto& t : tiny_tensors(tiny_config())) wm[t.name] = "model.safetensors";
    wm["model.norm.weight"] = "model-00002-of-00002.safetensors";
    write_file(dir / "model.safetensors.index.json", json{{"weight_map", wm}}.dump());
    CHECK_THAT(error_of<FormatError>([&] { load_model(dir); }),
               Contains("model.safetensors.index.json") && Contains("model-00002-of-00002.safetensors") &&
                   Contains("does not exist"));
    // A shard name that leaves the folder is refused, not opened.
    wm["model.norm.weight"] = "../model.safetensors";
    write_file(dir / "model.safetensors.index.json", json{{"weight_map", wm}}.dump());
    CHECK_THAT(error_of<FormatError>([&] { load_model(dir); }), Contains("is not a file name in the folder"));
    // The index puts a tensor in a shard that does not hold it.
    wm["model.norm.weight"] = "model.safetensors";
    wm["model.layers.7.mlp.up_proj.weight"] = "model.safetensors";
    write_file(dir / "model.safetensors.index.json", json{{"weight_map", wm}}.dump());
    CHECK_THAT(error_of<FormatError>([&] { load_model(dir); }),
               Contains("model.layers.7.mlp.up_proj.weight") && Contains("has no such tensor"));
}
