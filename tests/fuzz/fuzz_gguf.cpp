// libFuzzer target: the GGUF reader. Whatever the bytes, gguf::parse() either throws a strata::Error or returns
// tensor infos whose bytes all lie inside the input (read here, so ASan checks it); an image that parses is then
// loaded as a Llama model through load_gguf (metadata -> config, vocabulary -> tokenizer, tensors -> views), from
// an in-memory file so no disk is touched.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

// The reader is compiled into this file, not taken from libstrata_engine.a, so that libFuzzer gets coverage from
// it and ASan sees its reads (the engine library of a -DSTRATA_FUZZ=ON build is not instrumented).
#include "../../engine/src/checkpoint/gguf_load.cpp"
#include "../../engine/src/checkpoint/gguf_parse.cpp"
#include "../../engine/src/checkpoint/gguf_types.cpp"

namespace {

void read_tensors(const strata::gguf::File& f, std::span<const std::byte> bytes) {
    std::vector<float> row;
    for (const strata::gguf::TensorInfo& t : f.tensors) {
        if (t.file_offset > bytes.size() || t.nbytes > bytes.size() - t.file_offset) __builtin_trap();  // promised
        const strata::gguf::TypeInfo* ti = strata::gguf::type_info(t.type);
        if (!ti) __builtin_trap();  // parse() rejects unknown ids
        if (!ti->dtype || strata::dtype_is_block(*ti->dtype) || t.ne.size() > 2 || t.numel() > (1u << 16)) continue;
        strata::TensorView v;
        v.name = t.name;
        v.dtype = *ti->dtype;
        v.shape = t.torch_shape();
        v.data = bytes.data() + t.file_offset;
        v.nbytes = t.nbytes;
        row.resize(static_cast<size_t>(v.cols()));
        const int64_t rows = v.shape.size() == 2 ? v.rows() : 1;
        for (int64_t r = 0; r < rows; ++r) v.row_to_f32(r, row.data());
    }
}

void load_from_memory(const uint8_t* data, size_t size) {
    const int fd = memfd_create("fuzz.gguf", MFD_CLOEXEC);
    if (fd < 0) return;
    size_t done = 0;
    while (done < size) {
        const ssize_t n = write(fd, data + done, size - done);
        if (n <= 0) break;
        done += static_cast<size_t>(n);
    }
    if (done == size) {
        try {
            auto m = strata::load_gguf("/proc/self/fd/" + std::to_string(fd), {});
            // A model that loads has views inside its mapping.
            for (const auto& [name, t] : m->tensors)
                if (t.file_offset + t.nbytes > size) __builtin_trap();
        } catch (const strata::Error&) {
        }
    }
    close(fd);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
    try {
        const strata::gguf::File f = strata::gguf::parse(bytes, "fuzz.gguf");
        read_tensors(f, bytes);
    } catch (const strata::Error&) {
        return 0;  // a clear, typed error: the expected outcome for almost every input
    }
    load_from_memory(data, size);
    return 0;
}
