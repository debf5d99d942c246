#include "runtime/thread_pool.h"

#include <algorithm>

namespace tilesplash::runtime {

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

int ThreadPool::hardware_threads() {
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

void ThreadPool::ensure_workers(int count) {
  while (static_cast<int>(workers_.size()) < count) {
    const int worker = static_cast<int>(workers_.size()) + 1;
    workers_.emplace_back([this, worker] { worker_loop(worker); });
  }
}

void ThreadPool::drain(int worker) {
  for (;;) {
    std::int64_t item;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (next_item_ >= items_ || error_) return;
      item = next_item_++;
    }
    try {
      (*body_)(item, worker);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
      return;
    }
  }
}

void ThreadPool::worker_loop(int worker) {
  std::uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      if (worker > active_workers_) continue;
    }
    drain(worker);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
    }
  }
}

void ThreadPool::run(int threads, std::int64_t items,
                     const std::function<void(std::int64_t, int)>& body) {
  if (items <= 0) return;
  threads = static_cast<int>(std::clamp<std::int64_t>(threads, 1, items));
  if (threads == 1) {
    for (std::int64_t item = 0; item < items; ++item) body(item, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ensure_workers(threads - 1);
    body_ = &body;
    items_ = items;
    next_item_ = 0;
    error_ = nullptr;
    active_workers_ = threads - 1;
    pending_ = threads - 1;
    ++generation_;
  }
  wake_.notify_all();
  drain(0);
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0; });
    body_ = nullptr;
    error = error_;
    error_ = nullptr;
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace tilesplash::runtime
