#include "runtime/thread_pool.h"

#include <algorithm>
#include <stdexcept>

namespace tilesplash::runtime {
namespace {

// The regions the calling thread is inside, innermost first: a worker's own
// pool at the bottom, then each region it runs as caller. A region asked of a
// pool already on this chain is nested: waiting for the pool's turn would
// wait for ourselves.
struct Membership {
  const ThreadPool* pool;
  const Membership* outer;
};

thread_local const Membership* t_inside = nullptr;

bool inside(const ThreadPool* pool) {
  for (const Membership* m = t_inside; m != nullptr; m = m->outer) {
    if (m->pool == pool) return true;
  }
  return false;
}

class MembershipScope {
 public:
  explicit MembershipScope(const ThreadPool* pool) : self_{pool, t_inside} { t_inside = &self_; }
  ~MembershipScope() { t_inside = self_.outer; }
  MembershipScope(const MembershipScope&) = delete;
  MembershipScope& operator=(const MembershipScope&) = delete;

 private:
  Membership self_;
};

}  // namespace

ThreadPool::ThreadPool(std::function<void(int)> on_worker_start)
    : on_worker_start_(std::move(on_worker_start)) {}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& worker : workers_) worker.join();
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
  const MembershipScope member(this);
  if (on_worker_start_) on_worker_start_(worker);
  std::uint64_t seen = 0;
  for (;;) {
    bool together;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      if (worker > active_workers_) continue;
      together = together_;
    }
    if (together) {
      try {
        (*body_)(worker, worker);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!error_) error_ = std::current_exception();
      }
    } else {
      drain(worker);
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
    }
  }
}

void ThreadPool::run(int threads, std::int64_t items, const Body& body) {
  if (items <= 0) return;
  threads = static_cast<int>(std::clamp<std::int64_t>(threads, 1, items));
  if (threads == 1 || inside(this)) {
    // One thread, or nested: the caller alone, as worker 0. Per-worker scratch
    // belongs to the object making the call, which serves one call at a time,
    // so worker 0's is free even when the enclosing region uses its own.
    const MembershipScope member(this);
    for (std::int64_t item = 0; item < items; ++item) body(item, 0);
    return;
  }
  const std::lock_guard<std::mutex> turn(turn_);
  run_region(threads, items, body, false);
}

void ThreadPool::run_together(int threads, const Body& body) {
  if (inside(this)) {
    throw std::logic_error(
        "ThreadingContext::run_together: called from inside a region of the same context, where "
        "its threads cannot run side by side");
  }
  threads = std::max(threads, 1);
  const std::lock_guard<std::mutex> turn(turn_);
  run_region(threads, threads, body, true);
}

void ThreadPool::run_region(int threads, std::int64_t items, const Body& body, bool together) {
  const MembershipScope member(this);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ensure_workers(threads - 1);
    body_ = &body;
    together_ = together;
    items_ = together ? 0 : items;
    next_item_ = 0;
    error_ = nullptr;
    active_workers_ = threads - 1;
    pending_ = threads - 1;
    ++generation_;
  }
  wake_.notify_all();
  if (together) {
    try {
      body(0, 0);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
  } else {
    drain(0);
  }
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
