#pragma once
// What an explorer run needs before it allocates anything: the kept trace and the logit lens on the host, the KV
// cache and the step's buffers on the backend. A run that cannot fit is refused with a message that says how much
// and what to change, as the engine refuses a KV cache too large for memory (KVCache).
// Plain C++ over the engine's types (no Qt), so tests check it against what a run really keeps.
#include <cstdint>
#include <functional>
#include <string>

#include "strata/config.hpp"
#include "strata/trace.hpp"

namespace strata::ui {

struct RunMemory {
    uint64_t trace = 0;        // host: the kept tensors, top-k rows and last logits (trace_bytes)
    uint64_t lensHost = 0;     // host: the lens's result and the chunk of logits read back (0 without the lens)
    uint64_t lensBackend = 0;  // backend: the lens's buffers for one chunk of rows (0 without the lens)
    uint64_t buffers = 0;      // backend: the KV cache and the step's activation buffers
};

// The estimate for a T-token prompt run under `request`, with or without the logit lens.
RunMemory runMemory(const ModelConfig& config, const TraceRequest& request, int64_t T, bool lens);

// Where the memory comes from: the host's available bytes, the backend's, and whether the backend's buffers are
// host memory too (the CPU backend).
struct MemoryAvailable {
    uint64_t host = 0;
    uint64_t backend = 0;
    bool backendOnHost = true;
    std::string backendName;  // "cpu", "vulkan"
};

// Empty when a T-token run fits; else the message: how much it needs, of which memory, and what to change (a
// shorter prompt, at most about N tokens; the run without the logit lens when that alone fits). requestFor(T)
// is the trace the explorer keeps for a T-token prompt (EngineWorker::explorerRequest).
std::string runMemoryProblem(const ModelConfig& config, int64_t T, bool lens, const MemoryAvailable& available,
                             const std::function<TraceRequest(int64_t)>& requestFor);

}  // namespace strata::ui
