// A small persistent pool: workers are created once and reused, because
// spawning threads per attention call costs more than small calls take. Work
// is pulled item by item from a shared counter, so items of uneven cost (rows
// of a sparse plan) balance themselves; callers order items costliest first.
// The pool behind ThreadingContext (tilesplash/threading.h), which documents
// the rules: one region at a time (others wait their turn), nested regions
// run inline on the calling thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tilesplash::runtime {

class ThreadPool {
 public:
  using Body = std::function<void(std::int64_t, int)>;

  // on_worker_start(worker), when set, runs first on each new worker thread
  // (worker 1, 2, ...): where pinning happens.
  explicit ThreadPool(std::function<void(int)> on_worker_start = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Runs body(item, worker) for every item in [0, items) on `threads` threads
  // (the calling thread is worker 0). Rethrows the first exception a body
  // raised, after every thread has stopped.
  void run(int threads, std::int64_t items, const Body& body);

  // body(worker, worker) once on each of `threads` threads at the same time.
  // Throws std::logic_error when the calling thread is inside a region of this
  // pool.
  void run_together(int threads, const Body& body);

 private:
  void ensure_workers(int count);
  void worker_loop(int worker);
  void drain(int worker);
  // The region itself, the turn held; together: each thread runs its own item.
  void run_region(int threads, std::int64_t items, const Body& body, bool together);

  std::function<void(int)> on_worker_start_;
  std::mutex turn_;  // held by the thread whose region runs
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::uint64_t generation_ = 0;
  bool stopping_ = false;
  bool together_ = false;
  int active_workers_ = 0;  // workers (besides the caller) taking part in this run
  int pending_ = 0;         // of those, how many have not finished
  std::int64_t items_ = 0;
  std::int64_t next_item_ = 0;
  const Body* body_ = nullptr;
  std::exception_ptr error_;
};

}  // namespace tilesplash::runtime
