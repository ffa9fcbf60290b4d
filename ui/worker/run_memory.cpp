#include "worker/run_memory.hpp"

#include <algorithm>

#include "strata/host_memory.hpp"
#include "strata/transformer.hpp"
#include "worker/analysis.hpp"

namespace strata::ui {

namespace {

uint64_t sum(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

// Bytes needed on the host and on the backend (the same memory with the CPU backend: then all of it is host).
struct Need {
    uint64_t host = 0, backend = 0;
};
Need need(const RunMemory& m, const MemoryAvailable& a) {
    const uint64_t backend = sum(m.buffers, m.lensBackend), host = sum(m.trace, m.lensHost);
    return a.backendOnHost ? Need{sum(host, backend), 0} : Need{host, backend};
}
bool fits(const RunMemory& m, const MemoryAvailable& a) {
    const Need n = need(m, a);
    return n.host <= a.host && (a.backendOnHost || n.backend <= a.backend);
}

}  // namespace

RunMemory runMemory(const ModelConfig& c, const TraceRequest& request, int64_t T, bool lens) {
    RunMemory m;
    m.trace = trace_bytes(c, request, T);
    m.buffers = sum(kv_cache_bytes(c, T), step_buffer_bytes(c, request, T));
    if (lens) {
        // analysis::logit_lens_top: per residual row its top token, logit and probability; the logits of one chunk
        // of rows read back at a time, from the lens's own buffers on the backend (rows of h, norm(h), logits).
        const uint64_t chunk = uint64_t(analysis::lens_chunk_rows(c.vocab_size));
        m.lensHost = sum(uint64_t(c.n_layers + 1) * uint64_t(T) * 12, chunk * uint64_t(c.vocab_size) * 4);
        m.lensBackend = chunk * uint64_t(2 * c.dim + c.vocab_size) * 4;
    }
    return m;
}

std::string runMemoryProblem(const ModelConfig& c, int64_t T, bool lens, const MemoryAvailable& available,
                             const std::function<TraceRequest(int64_t)>& requestFor) {
    const RunMemory m = runMemory(c, requestFor(T), T, lens);
    if (fits(m, available)) return {};
    const Need n = need(m, available);
    const bool onHost = n.host > available.host;
    std::string msg = "this " + std::to_string(T) + "-token prompt needs " + format_bytes(onHost ? n.host : n.backend) +
                      " for the explorer's run (";
    if (onHost) msg += "the kept trace " + format_bytes(m.trace) + ", ";
    if (lens) msg += "the logit lens " + format_bytes(onHost ? m.lensHost + (available.backendOnHost ? m.lensBackend : 0) : m.lensBackend) + ", ";
    if (!onHost || available.backendOnHost) msg += "the KV cache and the step's buffers " + format_bytes(m.buffers) + ", ";
    msg.resize(msg.size() - 2);
    msg += "), more than the " + format_bytes(onHost ? available.host : available.backend) + " " +
           (onHost && !available.backendOnHost ? std::string("the host") : "the " + available.backendName + " backend") +
           " has available";
    // The longest prompt that fits, under the explorer's own choice of trace for each length. Not a bisection:
    // that choice keeps more for shorter prompts (every logits row below 16 M floats, attention probabilities
    // up to 256 positions), so the need is not monotone in the length.
    int64_t lo = T - 1;
    while (lo > 0 && !fits(runMemory(c, requestFor(lo), lo, lens), available)) --lo;
    std::string change;
    if (lo > 0) change = "use a shorter prompt (at most about " + std::to_string(lo) + " tokens)";
    if (lens && fits(runMemory(c, requestFor(T), T, false), available))
        change += std::string(change.empty() ? "" : ", or ") + "turn off the logit lens";
    if (change.empty()) change = "open the model on a machine with more memory";
    return msg + ": " + change;
}

}  // namespace strata::ui
