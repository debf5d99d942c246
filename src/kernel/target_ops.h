// What each SIMD target's translation unit exports: its attention forward and
// the register-resident multiply-add loops that measure its peak. Dispatch
// (kernel/isa_dispatch.h) holds one of these per target of targets.def.
#pragma once

#include <cstdint>

#include "kernel/forward_params.h"

namespace tilesplash::kernel {

struct FmaLoop {
  // Runs `rounds` rounds of independent multiply-adds and returns a value that
  // depends on every accumulator, so the work cannot be optimised away.
  float (*run)(std::int64_t rounds) = nullptr;
  double flops_per_round = 0.0;
};

struct TargetOps {
  ForwardFn forward = nullptr;
  FmaLoop f32_peak;
  // The rate bf16 inputs run at; run == nullptr when they are widened to f32
  // (the f32 loop is then the bf16 peak too).
  FmaLoop bf16_peak;
};

}  // namespace tilesplash::kernel
