// libFuzzer target: the torch.save readers. The input is run as a pickle (read_state_dict) and opened as a zip
// archive (central directory, local headers, member data); an archive's <prefix>/data.pkl is run as a pickle too.
// Every outcome must be a result or a strata::Error: no crash, no hang, no leak, no read outside the input.
#include <cstddef>
#include <cstdint>
#include <span>

// Compiled in, for coverage and ASan (see fuzz_gguf.cpp).
#include "../../engine/src/checkpoint/pickle.cpp"
#include "../../engine/src/checkpoint/torch_zip.cpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
    try {
        const auto tensors = strata::pickle::read_state_dict(bytes, "fuzz.pkl");
        for (const auto& t : tensors)
            if (t.shape.size() != t.stride.size() || t.storage_offset < 0) __builtin_trap();
    } catch (const strata::Error&) {
    }
    try {
        const strata::torch_zip::Archive zip(bytes, "fuzz.pth");
        for (const strata::torch_zip::Member& m : zip.members()) {
            try {
                const auto d = zip.data(m);
                if (d.data() < bytes.data() || d.data() + d.size() > bytes.data() + bytes.size()) __builtin_trap();
                volatile std::byte sink{};
                for (std::byte b : d) sink = sink ^ b;  // ASan checks every byte of the span
                if (m.name.ends_with("data.pkl")) (void)strata::pickle::read_state_dict(d, "fuzz.pth:" + m.name);
            } catch (const strata::Error&) {
            }
        }
    } catch (const strata::Error&) {
    }
    return 0;
}
