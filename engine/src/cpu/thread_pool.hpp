#pragma once
// A persistent pool of worker threads for the CPU backend. Ops split their work into index ranges
// (output rows for matmul, heads for attention) and run them on every thread at once; the calling thread
// takes part, so a pool of N threads starts N-1 workers. Workers stay alive between ops: a decode step runs
// a hundred small parallel ops, and starting threads for each would cost more than the work.
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace strata::cpu {

class ThreadPool {
public:
    explicit ThreadPool(int threads);  // threads <= 0: hardware concurrency
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return static_cast<int>(workers_.size()) + 1; }

    // Calls fn(begin, end) over disjoint ranges covering [0, n), ranges aligned to `grain`, one per thread
    // (fewer when n is small), and returns when all are done. An exception thrown by fn is rethrown here.
    void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

private:
    void worker_loop(int index);
    void run_share(int index);

    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::condition_variable done_;
    uint64_t generation_ = 0;  // bumped for each parallel_for; workers wait for a new one
    int pending_ = 0;          // workers still running the current job
    bool stop_ = false;
    // The current job (valid while pending_ > 0).
    const std::function<void(int64_t, int64_t)>* job_ = nullptr;
    int64_t n_ = 0, chunk_ = 0;
    std::exception_ptr error_;
};

}  // namespace strata::cpu
