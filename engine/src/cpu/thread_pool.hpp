#pragma once
// A persistent pool of worker threads for the CPU backend. Ops split their work into index ranges
// (output rows for matmul, heads for attention) and run them on every thread at once; the calling thread
// takes part, so a pool of N threads starts N-1 workers. Workers stay alive between ops: a decode step runs
// a few hundred small parallel ops, and starting threads for each would cost more than the work.
//
// Hand-off: a job is cut into chunks (several per thread) that threads claim from one atomic word, and the job is
// done when every chunk is, not when every worker has checked in: a worker that is asleep, or descheduled because
// another process wants its core, simply claims nothing, and the others (the caller first) do its share. Between
// jobs a worker spins for a short while watching for the next one before it sleeps on a condition variable:
// decode's ops follow each other within microseconds, and waking a sleeping thread costs tens of them.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
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

    // Calls fn(begin, end) over disjoint ranges covering [0, n), ranges aligned to `grain`, spread over the
    // threads (one call for all of it when n is small), and returns when all are done. An exception thrown by fn
    // is rethrown here.
    void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

private:
    void worker_loop();
    // Claims and runs chunks of job `generation` until none is left.
    void run_chunks(uint32_t generation);

    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::condition_variable wake_;  // workers sleeping for a new generation
    std::condition_variable done_;  // the caller sleeping until every chunk is done
    int sleepers_ = 0;              // workers waiting on wake_ (guarded by mutex_)
    bool stop_ = false;             // guarded by mutex_; stopping_ mirrors it for spinners
    std::atomic<bool> stopping_{false};
    // generation << 32 | chunk count << 16 | next chunk: a chunk is claimed by a compare-and-swap that fails once
    // the word belongs to another job, so a late worker can never take a chunk of the wrong job.
    std::atomic<uint64_t> work_{0};
    std::atomic<int64_t> chunks_done_{0};
    // The current job, written before its generation is published and read only by a thread holding a claimed
    // chunk (the caller does not start the next job before every claimed chunk is done).
    const std::function<void(int64_t, int64_t)>* job_ = nullptr;
    int64_t n_ = 0, chunk_ = 0;
    std::exception_ptr error_;  // guarded by mutex_
};

}  // namespace strata::cpu
