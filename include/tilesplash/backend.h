// The compute-backend seam: one interface for whatever executes a tile plan
// on tensor views. The library's own backend is the CPU kernel
// (AttentionRunner, attention.h, named "cpu"); another backend (a GPU kernel
// of our own, FlashInfer) implements the same interface, reads the plan
// through its flat arrays (block_sparse.h) and checks the views' device
// (tensor.h). Everything above the kernel that runs plans (masked_attention,
// the video router and front door, the tile tuner) holds an AttentionBackend&,
// and backends are made by name from one list, so a new backend is one class,
// one folder and one entry in make_backend().
//
// PyTorch FlexAttention, tilesplash's GPU path today, is a backend of the
// Python layer (python/tilesplash/_flex, resolved from backend= in
// python/tilesplash/_backends/): it consumes the same flat
// arrays through TilePlan.block_sparse().
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "tilesplash/attention_args.h"
#include "tilesplash/plan.h"
#include "tilesplash/tensor.h"
#include "tilesplash/threading.h"

namespace tilesplash {

class AttentionBackend {
 public:
  virtual ~AttentionBackend() = default;

  // The name make_backend() knows it by ("cpu"). Name, device and code path
  // are what a tuning key records of the backend that timed it
  // (make_tune_key(backend, ...), tuning.h), so each backend keys its own.
  virtual std::string_view name() const = 0;
  // What it runs on: the CPU model for "cpu", a GPU's name for a GPU backend.
  virtual std::string device_name() const = 0;
  // Its code path on that device: the active SIMD target (active_isa()) for
  // "cpu"; timings of one path say nothing of another.
  virtual std::string code_path() const = 0;
  // The worker threads a call with options.threads == requested runs on
  // (tuning-cache keys and tile choices depend on it); 1 for a backend that
  // runs no host threads.
  virtual int threads(int requested) const = 0;
  // Whether it can read and write memory on `device`.
  virtual bool accepts(Device device) const = 0;
  // Attention of args under the plan (attention.h's AttentionArgs rules).
  // Throws std::invalid_argument naming the argument on a mismatch, a view
  // on a device it does not accept included.
  virtual void forward(const TilePlan& plan, const AttentionArgs& args,
                       const AttentionOptions& options = {}) = 0;
};

// The backends this build can make, by name: "cpu".
std::span<const std::string_view> backend_names();

// A new backend by name; context: the threads a CPU backend runs on (null: a
// private context). Throws std::invalid_argument naming the known backends.
std::unique_ptr<AttentionBackend> make_backend(std::string_view name,
                                               std::shared_ptr<ThreadingContext> context = nullptr);

}  // namespace tilesplash
