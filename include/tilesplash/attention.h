// The kernel: *how* the plan is executed. A flash-attention forward pass with
// an online softmax that visits only the plan's tiles: empty tiles are never
// touched, full tiles run with no mask work at all, partial tiles apply their
// bitmask. Inputs f32, bf16 or f16 with f32 accumulation. The SIMD code is
// chosen once per process from CPUID (AVX-512 with BF16 dot products and
// VNNI, AVX-512, AVX2+FMA, NEON, or portable C++); within a target, how bf16
// is multiplied (dot product or widened to f32) is chosen by measuring both
// on the CPU (choose_product_path). Results are bit-identical for any thread
// count and any loop variant.
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
  std::string device_name() const override;   // the CPU model
  std::string code_path() const override;     // active_isa()
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

// The path bf16 inputs take on the active target, and why.
struct ProductPathChoice {
  ProductPath path = ProductPath::kWiden;  // kDot or kWiden
  std::string reason;
  double dot_gflops = 0.0;  // the calibration's rates on one core (0: not measured)
  double fma_gflops = 0.0;
};
// `requested` unless kAuto. kAuto: TILESPLASH_PRODUCT_PATH=dot|widen when
// set; kWiden on a target without a bf16 dot product; else whichever of the
// dot product and the f32 FMA is faster on this CPU model (the dot product
// when it runs at >= 1.1x the FMA rate, so the bf16 kernel, which loses a
// little more to its softmax, still comes out ahead), measured with the two
// peak loops on one core (about 50 ms), once per process and target, and
// kept in the tuning cache (TuningCache::default_path(), tuning.h) under the
// CPU model and target, so that later processes only read it. Throws
// std::invalid_argument for kDot, or TILESPLASH_PRODUCT_PATH=dot, on a
// target without a dot product, and for any other TILESPLASH_PRODUCT_PATH.
ProductPathChoice choose_product_path(ProductPath requested = ProductPath::kAuto);

// What a call's two products run on, in words (bench --json reports them):
// e.g. "f32 FMA", "f32 FMA (bf16 widened)", "bf16 dot product (vdpbf16ps)",
// "bf16 dot product (AMX tdpbf16ps)", "int8 vpdpbusd (AVX-512 VNNI)",
// "int8 tdpbusd (AMX)". `resolved`: choose_product_path().path.
struct KernelProducts {
  std::string qk;
  std::string pv;
};
KernelProducts kernel_products(DType dtype, Precision precision, ProductPath resolved);

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
