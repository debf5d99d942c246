// tilesplash._core.ThreadingContext: a library ThreadingContext (threading.h)
// that Python code creates and hands to attention() and VideoAttention, plus
// the kernel runners attention() borrows on it: a runner's workspaces serve
// one call at a time, so each concurrent call on one context takes an idle
// runner (or makes one) and gives it back, and the runners die with the
// context object.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "tilesplash/attention.h"
#include "tilesplash/threading.h"

namespace tilesplash::python {

class PyThreadingContext {
 public:
  PyThreadingContext(int threads, bool pin, int first_cpu);

  const std::shared_ptr<ThreadingContext>& context() const { return context_; }
  int threads() const { return context_->threads(); }

  // A runner on this context for the length of one call.
  class Lease {
   public:
    explicit Lease(PyThreadingContext& owner);
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    AttentionBackend& runner() { return *runner_; }

   private:
    PyThreadingContext& owner_;
    std::unique_ptr<AttentionBackend> runner_;
  };

 private:
  std::shared_ptr<ThreadingContext> context_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<AttentionBackend>> idle_;
};

}  // namespace tilesplash::python
