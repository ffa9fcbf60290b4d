// The trained demonstration model's compact weights, embedded with the assembler's .incbin: the 4 MB file is read
// by `as` as it is, with no multi-megabyte generated source for the compiler to parse. STRATA_DEMO_BLOB (its path)
// and STRATA_DEMO_BLOB_SHA256 come from engine/CMakeLists.txt; the hash is in the compile line so that ccache,
// which does not see .incbin's input, recompiles this file when the blob changes.
#include "demo_blob.hpp"

#ifndef STRATA_DEMO_BLOB
#error "STRATA_DEMO_BLOB (the path of resources/demo/demo-model.bin) must be defined"
#endif

asm(".section .rodata\n"
    ".balign 16\n"
    ".local strata_demo_blob_begin\n"
    "strata_demo_blob_begin:\n"
    ".incbin \"" STRATA_DEMO_BLOB "\"\n"
    ".local strata_demo_blob_end\n"
    "strata_demo_blob_end:\n"
    ".previous\n");

extern "C" const std::byte strata_demo_blob_begin[];
extern "C" const std::byte strata_demo_blob_end[];

namespace strata::detail {

std::span<const std::byte> demo_blob() {
    return {strata_demo_blob_begin, static_cast<size_t>(strata_demo_blob_end - strata_demo_blob_begin)};
}

std::string_view demo_blob_sha256() { return STRATA_DEMO_BLOB_SHA256; }

}  // namespace strata::detail
