// Compile-time traits of one SIMD target's kernel: vector width, register
// tile, key panel. Every constant the kernel templates use is derived here,
// and the static_asserts tie them to the public limits (tilesplash/
// kernel_limits.h), so a target that could not run an allowed size (a key
// panel that does not divide block_kv, a register tile that spills) fails to
// compile instead of failing a test.
#pragma once

#include <cstdint>

#include "tilesplash/kernel_limits.h"

namespace tilesplash::kernel {

inline constexpr std::int64_t kMaxHeadDim = kernel_limits::kMaxHeadDim;

// Lanes: floats per vector. ColVecs: vectors per micro-tile row, so a key
// panel (Q.K^T) or output column chunk (P.V) is Lanes * ColVecs wide. Rows:
// query rows per micro-tile. Registers: vector registers of the ISA.
template <int Lanes, int ColVecs, int Rows, int Registers>
struct KernelTraits {
  static constexpr int kLanes = Lanes;
  static constexpr int kColVecs = ColVecs;
  static constexpr int kRows = Rows;
  static constexpr int kRegisters = Registers;
  static constexpr std::int64_t kPanel = std::int64_t{Lanes} * ColVecs;
  // Independent multiply-add chains of the peak loop: every register but the
  // two operands and a little slack, capped where the FMA latency is covered.
  static constexpr int kPeakChains = Registers - 4 < 24 ? Registers - 4 : 24;

  static_assert(Lanes == 4 || Lanes == 8 || Lanes == 16, "vectors of 128, 256 or 512 bits");
  static_assert(Rows >= 1 && Rows <= 8, "the row dispatch (with_rows) handles 1 to 8 rows");
  // kRows * kColVecs accumulators, kColVecs loaded operands and one broadcast.
  static_assert(Rows * ColVecs + ColVecs + 1 <= Registers, "the register tile must not spill");
  static_assert(kernel_limits::kBlockKvMultiple % kPanel == 0,
                "every allowed block_kv must hold whole key panels");
  static_assert(kernel_limits::kHeadDimMultiple % 2 == 0,
                "the bf16 paths pack pairs of channels: head dims must be even");
  static_assert(kPeakChains >= 8, "the peak loop needs enough chains to cover FMA latency");
};

}  // namespace tilesplash::kernel
