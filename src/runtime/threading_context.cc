// ThreadingContext: the options, the hardware thread count, and a pool whose
// workers pin themselves when asked.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/cpu_affinity.h"
#include "runtime/thread_pool.h"
#include "tilesplash/threading.h"

namespace tilesplash {
namespace {

void check_threads(const char* who, int threads) {
  if (threads < 0 || threads > kMaxThreads) {
    throw std::invalid_argument(std::string(who) + ": threads must be in [0, " +
                                std::to_string(kMaxThreads) + "] (0: hardware threads), got " +
                                std::to_string(threads));
  }
}

ThreadingOptions checked(ThreadingOptions options) {
  check_threads("ThreadingContext", options.threads);
  if (options.first_cpu < 0) {
    throw std::invalid_argument("ThreadingContext: first_cpu must be >= 0, got " +
                                std::to_string(options.first_cpu));
  }
  return options;
}

std::function<void(int)> pinning(const ThreadingOptions& options) {
  if (!options.pin) return {};
  const std::vector<int> cpus = runtime::allowed_cpus();
  if (cpus.empty()) return {};
  return [cpus, first = options.first_cpu](int worker) {
    const std::size_t index =
        (static_cast<std::size_t>(first) + static_cast<std::size_t>(worker)) % cpus.size();
    runtime::pin_current_thread(cpus[index]);
  };
}

}  // namespace

int hardware_threads() {
  const std::size_t allowed = runtime::allowed_cpus().size();
  if (allowed > 0) return static_cast<int>(allowed);
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

struct ThreadingContext::Impl {
  explicit Impl(const ThreadingOptions& options) : pool(pinning(options)) {}
  runtime::ThreadPool pool;
};

ThreadingContext::ThreadingContext(int threads) : ThreadingContext(ThreadingOptions{threads}) {}

ThreadingContext::ThreadingContext(const ThreadingOptions& options)
    : options_(checked(options)),
      threads_(options_.threads > 0 ? options_.threads : hardware_threads()),
      impl_(std::make_unique<Impl>(options_)) {}

ThreadingContext::~ThreadingContext() = default;

void ThreadingContext::run(int threads, std::int64_t items,
                           const std::function<void(std::int64_t, int)>& body) {
  check_threads("ThreadingContext::run", threads);
  impl_->pool.run(resolve(threads), items, body);
}

void ThreadingContext::run_together(int threads, const std::function<void(int)>& body) {
  check_threads("ThreadingContext::run_together", threads);
  impl_->pool.run_together(resolve(threads), [&](std::int64_t, int worker) { body(worker); });
}

const std::shared_ptr<ThreadingContext>& default_threading_context() {
  static const std::shared_ptr<ThreadingContext> context = std::make_shared<ThreadingContext>();
  return context;
}

}  // namespace tilesplash
