// libFuzzer target: a Hugging Face folder through the real loader (load_model). One input is split at "\n@@\n"
// lines into config.json, generation_config.json and model.safetensors.index.json (a part that is not there is
// a file that does not exist); they are written beside a fixed, valid tiny model.safetensors and tokenizer.model
// (dim 8, 1 layer, 2 heads : 1 KV head, FFN 16, vocabulary 512). Only a strata::Error may come out, and a model
// that loads must satisfy check_model's invariants.
//   ./tests/fuzz/fuzz_hf_folder -max_total_time=60 ../tests/fuzz/corpus/fuzz_hf_folder
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "fuzz_support.hpp"
#include "strata/dtype.hpp"

namespace {

std::filesystem::path g_dir;

// model.safetensors for the tiny model: F32, BF16 and F16 tensors, values k/64.
std::string tiny_safetensors() {
    struct T {
        const char* name;
        const char* dtype;
        std::vector<int64_t> shape;
    };
    const std::vector<T> ts = {
        {"model.embed_tokens.weight", "BF16", {512, 8}},
        {"model.layers.0.self_attn.q_proj.weight", "BF16", {8, 8}},
        {"model.layers.0.self_attn.k_proj.weight", "F16", {4, 8}},
        {"model.layers.0.self_attn.v_proj.weight", "F32", {4, 8}},
        {"model.layers.0.self_attn.o_proj.weight", "BF16", {8, 8}},
        {"model.layers.0.mlp.gate_proj.weight", "BF16", {16, 8}},
        {"model.layers.0.mlp.down_proj.weight", "F16", {8, 16}},
        {"model.layers.0.mlp.up_proj.weight", "BF16", {16, 8}},
        {"model.layers.0.input_layernorm.weight", "F32", {8}},
        {"model.layers.0.post_attention_layernorm.weight", "F32", {8}},
        {"model.norm.weight", "F32", {8}},
        {"lm_head.weight", "BF16", {512, 8}},
    };
    nlohmann::json h = {{"__metadata__", {{"format", "pt"}}}};
    std::string data;
    int k = 0;
    for (const T& t : ts) {
        int64_t n = 1;
        for (int64_t d : t.shape) n *= d;
        const size_t begin = data.size();
        for (int64_t i = 0; i < n; ++i, ++k) {
            const float v = static_cast<float>(k % 127 - 63) / 64.0f;
            if (std::string_view(t.dtype) == "F32") {
                data.append(reinterpret_cast<const char*>(&v), 4);
            } else {
                const uint16_t x = std::string_view(t.dtype) == "BF16" ? strata::f32_to_bf16(v) : strata::f32_to_f16(v);
                data.append(reinterpret_cast<const char*>(&x), 2);
            }
        }
        h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
    }
    const std::string header = h.dump();
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((uint64_t(header.size()) >> (8 * i)) & 0xff);
    return out + header + data;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    g_dir = strata::fuzz::scratch("hf");
    strata::fuzz::write_file(g_dir / "model.safetensors", tiny_safetensors());
    strata::fuzz::write_file(g_dir / "tokenizer.model", strata::fuzz::byte_ranks());
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto parts = strata::fuzz::split(std::string_view(reinterpret_cast<const char*>(data), size), 3);
    strata::fuzz::put(g_dir / "config.json", parts[0]);
    strata::fuzz::put(g_dir / "generation_config.json", parts[1]);
    strata::fuzz::put(g_dir / "model.safetensors.index.json", parts[2]);
    try {
        const auto m = strata::load_model(g_dir);
        strata::fuzz::check_model(*m);
        strata::fuzz::check(m->format == strata::CheckpointFormat::HuggingFace);
    } catch (const strata::Error&) {
        // A typed error naming the file: the expected outcome for almost every input.
    }
    return 0;
}
