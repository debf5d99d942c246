// A small persistent pool: workers are created once and reused, because
// spawning threads per attention call costs more than small calls take. Work
// is pulled item by item from an atomic counter, so items of uneven cost (rows
// of a sparse plan) balance themselves; callers order items costliest first.
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
  ThreadPool() = default;
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Runs body(item, worker) for every item in [0, items) on `threads` workers
  // (the calling thread is worker 0). Rethrows the first exception a worker
  // raised, after every worker has stopped.
  void run(int threads, std::int64_t items, const std::function<void(std::int64_t, int)>& body);

  static int hardware_threads();

 private:
  void ensure_workers(int count);
  void worker_loop(int worker);
  void drain(int worker);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::uint64_t generation_ = 0;
  bool stopping_ = false;
  int active_workers_ = 0;  // workers (besides the caller) taking part in this run
  int pending_ = 0;         // of those, how many have not finished
  std::int64_t items_ = 0;
  std::int64_t next_item_ = 0;
  const std::function<void(std::int64_t, int)>* body_ = nullptr;
  std::exception_ptr error_;
};

}  // namespace tilesplash::runtime
