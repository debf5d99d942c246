// The kernel: *how* the plan is executed. A flash-attention forward pass with
// an online softmax that visits only the plan's tiles: empty tiles are never
// touched, full tiles run with no mask work at all, partial tiles apply their
// bitmask. Inputs f32, bf16 or f16 with f32 accumulation. The SIMD code is
// chosen once per process from CPUID (AVX-512 with BF16 dot products, AVX-512,
// AVX2+FMA, or portable C++); results are bit-identical for any thread count.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tilesplash/attention_args.h"
#include "tilesplash/backend.h"
#include "tilesplash/plan.h"
#include "tilesplash/tensor.h"
#include "tilesplash/threading.h"

namespace tilesplash {

// Owns the grow-only workspaces (packed K/V, per-thread scratch), so repeated
// calls do not pay for fresh memory, and runs on a ThreadingContext
// (threading.h): its own, or one it shares with other objects. One runner
// serves one call at a time; for calls side by side use one runner per
// calling thread, each with its own context (runners sharing a context take
// turns on its workers).
class AttentionRunner : public AttentionBackend {
 public:
  // A private context of hardware_threads() threads (workers start on the
  // first call that needs them).
  AttentionRunner();
  // Runs on `context`, which it keeps alive; null: a private one as above.
  explicit AttentionRunner(std::shared_ptr<ThreadingContext> context);
  ~AttentionRunner() override;
  AttentionRunner(const AttentionRunner&) = delete;
  AttentionRunner& operator=(const AttentionRunner&) = delete;

  // AttentionBackend: "cpu", host memory only.
  std::string_view name() const override { return "cpu"; }
  std::string device_name() const override;   // CPU model and active SIMD target
  int threads(int requested) const override;  // the context's resolve(requested)
  bool accepts(Device device) const override { return device.type == DeviceType::kCpu; }
  void forward(const TilePlan& plan, const AttentionArgs& args,
               const AttentionOptions& options = {}) override;

  const std::shared_ptr<ThreadingContext>& context() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Convenience: a runner per calling thread (its workspaces kept until the
// thread exits) on default_threading_context(). Concurrent callers never share
// a workspace, but they do share the default context's workers and take turns
// on them, region by region; threads that should run side by side each use
// their own AttentionRunner with its own ThreadingContext.
void attention_forward(const TilePlan& plan, const AttentionArgs& args,
                       const AttentionOptions& options = {});

// SIMD targets compiled into this build that this CPU runs, best first, and
// the one in use. TILESPLASH_ISA=<name> in the environment forces a
// (supported) target.
std::vector<std::string> available_isas();
std::string active_isa();
// Forces a target for this process (the tests run each target); throws
// std::invalid_argument for an unknown name or one the CPU lacks. An empty
// name restores automatic selection.
void set_isa(const std::string& name);

}  // namespace tilesplash
