// Register-resident multiply-add loops, one per SIMD target, that
// measure_peak_gflops() times. Each lives in its own translation unit so it is
// compiled with that target's -m flags; call one only when the CPU has it.
#pragma once

#include <cstdint>

namespace tilesplash::tuning {

struct FmaLoop {
  // Runs `rounds` rounds of independent multiply-adds and returns a value that
  // depends on every accumulator, so the work cannot be optimised away.
  float (*run)(std::int64_t rounds) = nullptr;
  double flops_per_round = 0.0;
};

FmaLoop fma_loop_f32_generic();
#if TILESPLASH_HAVE_X86_ISAS
FmaLoop fma_loop_f32_avx2();
FmaLoop fma_loop_f32_avx512();
FmaLoop fma_loop_bf16_avx512bf16();
#endif

}  // namespace tilesplash::tuning
