// libFuzzer target: the .npy reader (read_npy: how tensors enter Strata, e.g. the reference arrays). The input is
// the file, handed over as an in-memory file so that no disk is touched. Only a strata::Error may come out, and
// an array that reads must hold exactly the elements its shape says.
//   ./tests/fuzz/fuzz_npy -max_total_time=60 ../tests/fuzz/corpus/fuzz_npy
#include <cstdint>
#include <string>

#include <sys/mman.h>
#include <unistd.h>

#include "strata/error.hpp"
#include "strata/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const int fd = memfd_create("fuzz.npy", MFD_CLOEXEC);
    if (fd < 0) __builtin_trap();
    size_t done = 0;
    while (done < size) {
        const ssize_t n = write(fd, data + done, size - done);
        if (n <= 0) __builtin_trap();
        done += static_cast<size_t>(n);
    }
    try {
        const strata::NpyArray a = strata::read_npy("/proc/self/fd/" + std::to_string(fd));
        uint64_t n = 1;
        for (int64_t d : a.shape) {
            if (d < 0) __builtin_trap();
            n *= static_cast<uint64_t>(d);
        }
        if (n != a.data.size()) __builtin_trap();
        if (a.data.size() * 4 > size) __builtin_trap();  // at least 4 bytes of the file per float
    } catch (const strata::Error&) {
        // A typed error naming the file: the expected outcome for almost every input.
    }
    close(fd);
    return 0;
}
