// libFuzzer target: the safetensors header parser. Whatever the bytes, parse() either throws a strata::Error or
// returns tensors whose every byte lies inside the input; reading each accepted tensor proves it (ASan checks
// the reads against the exact input buffer).
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

// The parser is compiled into this file, not taken from libstrata_engine.a: the engine library of a
// -DSTRATA_FUZZ=ON build is not built with -fsanitize=fuzzer-no-link, so libFuzzer would get no coverage from
// it (and ASan would not see its reads). The archive's copy is then never linked: nothing else needs it.
#include "../../engine/src/checkpoint/safetensors.cpp"
#include "strata/error.hpp"
#include "strata/tensor.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
    try {
        const strata::safetensors::Header h = strata::safetensors::parse(bytes, "fuzz.safetensors");
        std::vector<float> row;
        for (const auto& e : h.tensors) {
            if (e.offset + e.nbytes > size) __builtin_trap();  // parse() promised the bytes are in the file
            strata::TensorView t;
            t.name = e.name;
            t.dtype = e.dtype;
            t.shape = e.shape;
            t.data = bytes.data() + e.offset;
            t.nbytes = e.nbytes;
            if (t.numel() == 0 || t.numel() > (1 << 16)) continue;
            // Read matrices as rows (also through the HF q/k row permutation when the rows split into heads).
            if (t.shape.size() == 2 && t.rows() % 2 == 0 && (t.rows() / 2) % 2 == 0) t.rope_heads = 2;
            const int64_t rows = t.shape.size() == 2 ? t.rows() : 1;
            if (t.shape.size() > 2) continue;
            row.resize(static_cast<size_t>(t.cols()));
            for (int64_t r = 0; r < rows; ++r) t.row_to_f32(r, row.data());
        }
    } catch (const strata::Error&) {
        // A clear, typed error is the expected outcome for almost every input.
    }
    return 0;
}
