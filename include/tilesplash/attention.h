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

#include "tilesplash/plan.h"
#include "tilesplash/tensor.h"
#include "tilesplash/threading.h"

namespace tilesplash {

enum class MaskMode : std::uint8_t {
  kTile,     // full tiles mask-free, partial tiles bitmasked (the default)
  kElement,  // the mask predicate evaluated on every pair of every visited tile
  kBitmask,  // every visited tile run through the bitmask path
};

std::string_view to_string(MaskMode mode);
std::optional<MaskMode> parse_mask_mode(std::string_view text);

struct AttentionOptions {
  std::optional<float> scale;  // softmax scale; default 1 / sqrt(head_dim); must be > 0
  MaskMode mask_mode = MaskMode::kTile;
  int threads = 0;  // 0: the runner's context's threads(); < 0 is rejected
  // Reject NaN / Inf in Q, K, V and q.k that overflows f32 (std::invalid_argument
  // naming the first row). false skips both: the caller vouches for its data.
  bool check_finite = true;
};

// Q [heads, q_len, d], K [heads, kv_len, d], V [heads, kv_len, dv]; out
// [heads, q_len, dv] in f32 or the input dtype; lse, when not null, receives
// heads * q_len floats (row-major) of log-sum-exp per row (natural log, of the
// scaled scores). A row with no kept key gives 0 and LSE = -inf.
// d and dv: multiples of 8 up to 256; plan.blocks().block_kv: a multiple of
// 64 up to 1024; block_q: 1 to 4096 (tilesplash/kernel_limits.h).
// Throws std::invalid_argument naming the argument on any mismatch.
struct AttentionArgs {
  TensorView q;
  TensorView k;
  TensorView v;
  MutableTensorView out;
  float* lse = nullptr;
};

// Owns the grow-only workspaces (packed K/V, per-thread scratch), so repeated
// calls do not pay for fresh memory, and runs on a ThreadingContext
// (threading.h): its own, or one it shares with other objects. One runner
// serves one call at a time; for calls side by side use one runner per
// calling thread, each with its own context (runners sharing a context take
// turns on its workers).
class AttentionRunner {
 public:
  // A private context of hardware_threads() threads (workers start on the
  // first call that needs them).
  AttentionRunner();
  // Runs on `context`, which it keeps alive; null: a private one as above.
  explicit AttentionRunner(std::shared_ptr<ThreadingContext> context);
  ~AttentionRunner();
  AttentionRunner(const AttentionRunner&) = delete;
  AttentionRunner& operator=(const AttentionRunner&) = delete;

  void forward(const TilePlan& plan, const AttentionArgs& args,
               const AttentionOptions& options = {});

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
