#include "cpu/thread_pool.hpp"

#include <algorithm>
#include <exception>

namespace strata::cpu {

ThreadPool::ThreadPool(int threads) {
    if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::run_share(int index) {
    const int64_t begin = static_cast<int64_t>(index) * chunk_;
    const int64_t end = std::min(n_, begin + chunk_);
    if (begin >= end) return;
    try {
        (*job_)(begin, end);
    } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!error_) error_ = std::current_exception();
    }
}

void ThreadPool::worker_loop(int index) {
    uint64_t seen = 0;
    for (;;) {
        {
            std::unique_lock<std::mutex> lock(mutex_);
            wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
            if (stop_) return;
            seen = generation_;
        }
        run_share(index);
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (--pending_ == 0) done_.notify_one();
        }
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
    {
        std::lock_guard<std::mutex> lock(mutex_);
        job_ = &fn;
        n_ = n;
        chunk_ = (units + threads - 1) / threads * grain;
        error_ = nullptr;
        pending_ = static_cast<int>(workers_.size());
        ++generation_;
    }
    wake_.notify_all();
    run_share(0);
    std::exception_ptr error;
    {
        std::unique_lock<std::mutex> lock(mutex_);
        done_.wait(lock, [&] { return pending_ == 0; });
        job_ = nullptr;
        error = error_;
    }
    if (error) std::rethrow_exception(error);
}

}  // namespace strata::cpu
