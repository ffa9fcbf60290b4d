// Run-time detection of the CPU's instruction sets (strata/cpu_isa.hpp), through GCC's __builtin_cpu_supports,
// which reads CPUID once and also checks that the operating system saves the vector registers (XGETBV).
#include "strata/cpu_isa.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

#include <string>

#include "strata/error.hpp"

namespace strata {

namespace {

constexpr CpuIsa kAll[] = {CpuIsa::Generic, CpuIsa::Avx2, CpuIsa::Avx512Vnni, CpuIsa::AvxVnni};

}  // namespace

std::string_view cpu_isa_name(CpuIsa isa) {
    switch (isa) {
        case CpuIsa::Generic: return "generic";
        case CpuIsa::Avx2: return "avx2";
        case CpuIsa::Avx512Vnni: return "avx512-vnni";
        case CpuIsa::AvxVnni: return "avx-vnni";
    }
    return "generic";
}

CpuIsa cpu_isa_from_name(std::string_view name) {
    std::string all;
    for (CpuIsa isa : kAll) {
        if (name == cpu_isa_name(isa)) return isa;
        all += std::string(all.empty() ? "" : ", ") + std::string(cpu_isa_name(isa));
    }
    throw InputError("unknown CPU instruction set \"" + std::string(name) + "\" (one of " + all + ")");
}

bool cpu_isa_supported(CpuIsa isa) {
#if defined(__x86_64__) && defined(__GNUC__)
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    switch (isa) {
        case CpuIsa::Generic: return true;
        case CpuIsa::Avx2: return avx2;
        case CpuIsa::Avx512Vnni:
            return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                   __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni");
        case CpuIsa::AvxVnni:  // the VEX form, or the EVEX one of AVX512-VNNI (quant/dot_q8.cpp)
            return (avx2 && __builtin_cpu_supports("avxvnni")) || cpu_isa_supported(CpuIsa::Avx512Vnni);
    }
    return false;
#else
    return isa == CpuIsa::Generic;
#endif
}

std::vector<CpuIsa> supported_cpu_isas() {
    std::vector<CpuIsa> v;
    for (CpuIsa isa : kAll)
        if (cpu_isa_supported(isa)) v.push_back(isa);
    return v;
}

CpuIsa best_cpu_isa() {
    for (CpuIsa isa : {CpuIsa::Avx512Vnni, CpuIsa::AvxVnni, CpuIsa::Avx2})
        if (cpu_isa_supported(isa)) return isa;
    return CpuIsa::Generic;
}

bool cpu_wide_float_kernels() {
#if defined(__x86_64__) && defined(__GNUC__)
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__builtin_cpu_is("amd") || !__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return true;
    const unsigned base = (eax >> 8) & 0xf, family = base == 0xf ? base + ((eax >> 20) & 0xff) : base;
    return family != 0x19;  // Zen 3 has no AVX-512; Zen 4 splits it; Zen 5 (1Ah) has full-width units
#else
    return true;
#endif
}

bool cpu_prefetch_rows() {
#if defined(__x86_64__) && defined(__GNUC__)
    return __builtin_cpu_is("intel");
#else
    return false;
#endif
}

int cpu_prefetch_ahead() { return cpu_prefetch_rows() ? 0 : 4096; }

}  // namespace strata
