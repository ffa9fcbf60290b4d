#include "cpu/thread_pool.hpp"

#include <algorithm>
#include <chrono>

namespace strata::cpu {

namespace {

// How long a worker watches for the next job before it sleeps, and chunks per thread.
constexpr auto kSpin = std::chrono::microseconds(50);
constexpr int64_t kChunksPerThread = 4;

inline uint32_t generation_of(uint64_t w) { return static_cast<uint32_t>(w >> 32); }
inline uint32_t chunks_of(uint64_t w) { return static_cast<uint32_t>(w >> 16) & 0xffffu; }
inline uint32_t next_of(uint64_t w) { return static_cast<uint32_t>(w) & 0xffffu; }

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
    if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    threads = std::min(threads, 4096);  // chunk counts must fit the 16 bits of work_
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
        stopping_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunks(uint32_t generation) {
    uint64_t w = work_.load(std::memory_order_acquire);
    for (;;) {
        if (generation_of(w) != generation || next_of(w) >= chunks_of(w)) return;
        if (!work_.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
        const int64_t c = next_of(w), chunks = chunks_of(w);
        const int64_t begin = c * chunk_, end = std::min(n_, begin + chunk_);
        try {
            (*job_)(begin, end);
        } catch (...) {
            std::lock_guard<std::mutex> lock(mutex_);
            if (!error_) error_ = std::current_exception();
        }
        if (chunks_done_.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) {
            std::lock_guard<std::mutex> lock(mutex_);  // the caller checks chunks_done_ under the lock to sleep
            done_.notify_one();
        }
        w = work_.load(std::memory_order_acquire);
    }
}

void ThreadPool::worker_loop() {
    uint32_t seen = 0;
    for (;;) {
        // Spin first: the next op usually comes within microseconds.
        const auto until = std::chrono::steady_clock::now() + kSpin;
        bool fresh = false;
        for (int i = 0;; ++i) {
            fresh = stopping_.load(std::memory_order_relaxed) ||
                    generation_of(work_.load(std::memory_order_acquire)) != seen;
            if (fresh || ((i & 63) == 63 && std::chrono::steady_clock::now() > until)) break;
            cpu_relax();
        }
        if (!fresh) {
            std::unique_lock<std::mutex> lock(mutex_);
            ++sleepers_;
            wake_.wait(lock, [&] { return stop_ || generation_of(work_.load()) != seen; });
            --sleepers_;
        }
        if (stopping_.load()) return;
        seen = generation_of(work_.load(std::memory_order_acquire));
        run_chunks(seen);
    }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
    if (n <= 0) return;
    grain = std::max<int64_t>(1, grain);
    const int64_t units = (n + grain - 1) / grain;
    const int64_t threads = std::min<int64_t>(size(), units);
    if (threads <= 1) {
        fn(0, n);
        return;
    }
    const int64_t want = std::min<int64_t>(units, threads * kChunksPerThread);
    const int64_t chunk = (units + want - 1) / want * grain;
    const int64_t chunks = (n + chunk - 1) / chunk;
    uint32_t generation;
    bool wake;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        job_ = &fn;
        n_ = n;
        chunk_ = chunk;
        error_ = nullptr;
        chunks_done_.store(0, std::memory_order_relaxed);
        generation = generation_of(work_.load(std::memory_order_relaxed)) + 1;
        work_.store(uint64_t(generation) << 32 | uint64_t(chunks) << 16, std::memory_order_release);
        wake = sleepers_ > 0;
    }
    if (wake) wake_.notify_all();
    run_chunks(generation);
    // Spin while other threads finish the chunks they claimed, then sleep.
    const auto until = std::chrono::steady_clock::now() + kSpin;
    for (int i = 0; chunks_done_.load(std::memory_order_acquire) != chunks; ++i) {
        if ((i & 63) == 63 && std::chrono::steady_clock::now() > until) break;
        cpu_relax();
    }
    std::exception_ptr error;
    {
        std::unique_lock<std::mutex> lock(mutex_);
        done_.wait(lock, [&] { return chunks_done_.load() == chunks; });
        job_ = nullptr;
        error = error_;
    }
    if (error) std::rethrow_exception(error);
}

}  // namespace strata::cpu
