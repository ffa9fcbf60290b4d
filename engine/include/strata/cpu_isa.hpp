#pragma once
// The instruction sets the CPU backend's kernels are written for, chosen at run time from what the CPU reports
// (machines differ: one build runs on all of them). Generic code uses GCC vector extensions (cloned for
// x86-64-v3 where the toolchain allows); the others are x86 intrinsics in functions compiled for that target
// and only ever called after the check.
#include <cstdint>
#include <string_view>
#include <vector>

namespace strata {

enum class CpuIsa : uint8_t {
    Generic,     // any CPU
    Avx2,        // AVX2 + FMA + F16C: F16 weights by vcvtph2ps, 8-bit dot products by vpmaddubsw + vpmaddwd
    Avx512Vnni,  // as Avx2, 8-bit dot products by vpdpbusd (AVX512-VNNI, -VL, -BW) on 512-bit vectors (two blocks
                 // of 32 or two sub-blocks per vector); and the float prefill tile on 512-bit vectors
    AvxVnni,     // as Avx2, 8-bit dot products by 256-bit vpdpbusd: its VEX form (AVX-VNNI), or on a CPU with
                 // AVX512-VNNI and not AVX-VNNI (AMD Zen 4) its EVEX form, the same instruction
};

// "generic", "avx2", "avx512-vnni", "avx-vnni".
std::string_view cpu_isa_name(CpuIsa isa);
// The instruction set named `name` (as cpu_isa_name writes it); InputError for an unknown name.
CpuIsa cpu_isa_from_name(std::string_view name);
// Whether this CPU (and the operating system, for the vector state) can run kernels written for `isa`.
bool cpu_isa_supported(CpuIsa isa);
// Every instruction set this CPU can run, Generic first.
std::vector<CpuIsa> supported_cpu_isas();
// The fastest: AVX512-VNNI (it also has the 512-bit prefill tile), then AVX-VNNI (the same 8-bit dot products
// on CPUs without AVX-512), then AVX2, then generic.
CpuIsa best_cpu_isa();

// Whether the float kernels (F16 decode, the float prefill tile) should take 512-bit vectors where the CPU has
// AVX-512. Not on AMD Zen 4 (family 19h), which runs each 512-bit operation as two 256-bit halves: there the
// 256-bit kernels measured faster (F16 prefill 1.35x, docs/performance.md). The CPU backend then runs
// Avx512Vnni's integer-dot kernels with Avx2's float ones, and AvxVnni's for a Q4_K or Q5_K prefill, unless
// Avx512Vnni was asked for by name.
bool cpu_wide_float_kernels();

// Whether the block-type decode prefetches each whole next weight row in software (quant::dot_q8_matrix).
// Measured (docs/performance.md): on an Intel Xeon it doubled one-thread Q4_K_M decode, a row of a few KiB being
// too short a stream for the hardware prefetcher there; on an AMD EPYC (Zen 4) that burst cost 10-25% of decode,
// and a line 2 KiB ahead of each line read, spread over the loop, gained 13% on 8B Q4_K_M. So the burst on Intel
// CPUs, the spread prefetch elsewhere.
bool cpu_prefetch_rows();

// How far ahead of its reads a decode kernel prefetches the weights (the block types' and the F16 fast path's):
// 4 KiB where cpu_prefetch_rows() is false, 0 where whole rows are prefetched instead. 2 KiB against none gained
// 13-14% on 8B Q4_K_M and F16 decode on an AMD EPYC Zen 4; 4 KiB against 2 KiB on a Zen 5, alternating runs:
// 8B Q4_K_M 1.03-1.10x (won 9 of 10 rounds), 8B F16 1.10-1.29x, 1B F16 1.05-1.10x, 1B Q8_0 and Q4_K_M within
// noise; 8 KiB was no better.
int cpu_prefetch_ahead();

}  // namespace strata
