// Threads as a value handed down, not a process-wide singleton (gemma.cpp's
// ThreadingContext is the model). A ThreadingContext owns a pool of worker
// threads, and every parallel part of tilesplash runs on a context it is
// given: the kernel (AttentionRunner), the video front door (VideoAttention),
// the token permutation, k-means and cluster masks, the synthetic workload,
// block tuning and the peak measurement. A rank, a Python thread or a
// diffusers processor owns its context and its thread count; two threads that
// each use their own context run at the same time and share no lock.
//
// One context runs one parallel region at a time. Threads that share a context
// take turns on its workers, region by region (a whole attention call is a few
// regions); a region started from inside a region of the same context (nested)
// runs on the calling thread alone, so nesting never deadlocks. Results never
// depend on the context or the thread count: every work item is computed on
// its own, whichever thread takes it.
//
// Objects hold their context through a shared_ptr, so it lives as long as
// its last user. An AttentionRunner or VideoAttention built without one owns a
// private context (as before contexts existed); the free functions that take
// an optional `ThreadingContext*` use default_threading_context() when given
// none, and so take turns with every other user of that default.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

namespace tilesplash {

// This process's CPUs: the size of its affinity mask (taskset, cpusets), else
// std::thread::hardware_concurrency(); at least 1.
int hardware_threads();

// The most threads a context or a region may be asked for (0 asks for
// hardware_threads()): far above any machine's cores, and low enough that a
// region's per-thread state and the workers it starts always fit.
inline constexpr int kMaxThreads = 4096;

struct ThreadingOptions {
  // Threads of a region whose caller asks for 0, the calling thread included:
  // the caller runs items too, so `threads` - 1 workers are started. 0:
  // hardware_threads(). A region may ask for more; the pool then grows to it
  // and keeps the extra workers.
  int threads = 0;
  // Pin worker w (1, 2, ...) to the allowed CPU at index (first_cpu + w)
  // modulo their count, so that contexts with disjoint first_cpu ranges keep
  // to their own cores. The calling thread is the caller's to place: it is
  // not pinned (index first_cpu is left for it).
  bool pin = false;
  int first_cpu = 0;  // >= 0; used only with pin
};

class ThreadingContext {
 public:
  // Throws std::invalid_argument unless 0 <= threads <= kMaxThreads and
  // first_cpu >= 0. Workers
  // start on the first region that needs them, not here.
  explicit ThreadingContext(int threads = 0);
  explicit ThreadingContext(const ThreadingOptions& options);
  // Stops and joins the workers. No region of this context may be running.
  ~ThreadingContext();
  ThreadingContext(const ThreadingContext&) = delete;
  ThreadingContext& operator=(const ThreadingContext&) = delete;

  int threads() const { return threads_; }  // resolved: >= 1
  const ThreadingOptions& options() const { return options_; }
  // The thread count of a call that asks for `requested`: itself when > 0,
  // else threads().
  int resolve(int requested) const { return requested > 0 ? requested : threads_; }

  // One parallel region: body(item, worker) for every item in [0, items), on
  // min(resolve(threads), items) threads (threads 0: threads()); worker in
  // [0, that count) says which thread runs the item (the caller is worker 0),
  // for per-worker scratch. Items are handed out one at a time from a shared
  // counter, so order items costliest first. Waits for a region another
  // thread runs on this context; a nested region runs on the calling thread
  // alone, as worker 0. Rethrows the first exception a body threw, after
  // every thread has stopped (items not yet started are skipped). Throws
  // std::invalid_argument unless 0 <= threads <= kMaxThreads.
  void run(int threads, std::int64_t items, const std::function<void(std::int64_t, int)>& body);

  // `threads` (resolved) threads each run body(worker) once, all at the same
  // time, for work that must run side by side (the peak measurement: its
  // workers wait for each other). Throws std::logic_error when called from
  // inside a region of this context, where that cannot be had.
  void run_together(int threads, const std::function<void(int)>& body);

 private:
  struct Impl;
  ThreadingOptions options_;
  int threads_ = 1;
  std::unique_ptr<Impl> impl_;
};

// The process's default context: hardware_threads() threads, unpinned,
// created on first use and kept until exit. Only the convenience entry points
// that are given no context use it (attention_forward(), the free permutation,
// kmeans(), cluster_head(), VideoWorkload, tune_blocks(), measure_peak());
// nothing requires it.
const std::shared_ptr<ThreadingContext>& default_threading_context();

}  // namespace tilesplash
