// libFuzzer target: a Meta folder through the real loader (load_model), for params.json and the checks on the
// state dict's records (names, storages, offsets, strides, shapes against the config). One input is split at
// "\n@@\n" into params.json and the pickle; the pickle is stored as consolidated/data.pkl of a
// consolidated.00.pth written with torch_zip::Writer, with byteorder "little" and fixed float32 storages
// data/0 ... data/11 and data/kv (0 and 1 hold 4096 elements, the others 256). tokenizer.model is fixed: the 256
// single bytes (vocabulary 512). The tiny model the seeds describe: dim 8, 1 layer, 2 heads : 1 KV head, FFN 32.
// Only a strata::Error may come out, and a model that loads must satisfy check_model's invariants.
//   ./tests/fuzz/fuzz_meta_folder -max_total_time=60 ../tests/fuzz/corpus/fuzz_meta_folder
#include <cstdint>
#include <cstring>
#include <string>

#include "../../engine/src/checkpoint/torch_zip.hpp"
#include "fuzz_support.hpp"

namespace {

std::filesystem::path g_dir;

std::string floats(size_t n, float base) {
    std::string s(n * 4, '\0');
    for (size_t i = 0; i < n; ++i) {
        const float v = base + static_cast<float>(i % 97) / 128.0f;
        std::memcpy(s.data() + 4 * i, &v, 4);
    }
    return s;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    g_dir = strata::fuzz::scratch("meta");
    strata::fuzz::write_file(g_dir / "tokenizer.model", strata::fuzz::byte_ranks());
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const std::string big = floats(4096, 0.5f), small = floats(256, -0.25f);
    const auto parts = strata::fuzz::split(std::string_view(reinterpret_cast<const char*>(data), size), 2);
    strata::fuzz::put(g_dir / "params.json", parts[0]);
    {
        strata::torch_zip::Writer w(g_dir / "consolidated.00.pth");
        w.add("consolidated/data.pkl", parts[1].value_or(""));
        w.add("consolidated/byteorder", "little");
        for (int k = 0; k < 12; ++k) w.add("consolidated/data/" + std::to_string(k), k < 2 ? big : small);
        w.add("consolidated/data/kv", small);
        w.add("consolidated/version", "3\n");
        w.finish();
    }
    try {
        const auto m = strata::load_model(g_dir);
        strata::fuzz::check_model(*m);
        strata::fuzz::check(m->format == strata::CheckpointFormat::Meta);
    } catch (const strata::Error&) {
        // A typed error naming the file: the expected outcome for almost every input.
    }
    return 0;
}
