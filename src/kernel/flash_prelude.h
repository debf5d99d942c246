// What every per-target kernel translation unit includes before opening its
// namespace and including kernel/kernel-inl.h.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "kernel/forward_params.h"
#include "kernel/int8_quantize.h"
#include "kernel/kernel_traits.h"
#include "kernel/scratch_layout.h"
#include "kernel/target_ops.h"
#include "tilesplash/attention.h"
#include "tilesplash/tensor.h"

namespace tilesplash::kernel {
// Internal linkage on purpose: each per-target translation unit is compiled
// with its own -m flags, and an `inline` function with external linkage would
// leave one copy for all of them, possibly the AVX2 one for the generic
// target (an illegal instruction on a CPU without AVX).
namespace {

inline void atomic_min(std::atomic<std::int64_t>& target, std::int64_t value) {
  std::int64_t current = target.load();
  while (value < current && !target.compare_exchange_weak(current, value)) {
  }
}

inline void atomic_max(std::atomic<int>& target, int value) {
  int current = target.load();
  while (value > current && !target.compare_exchange_weak(current, value)) {
  }
}

// `flat` is head * len + row, or INT64_MAX when every value was finite.
inline void report_non_finite(const char* name, std::int64_t flat, std::int64_t len) {
  if (flat == std::numeric_limits<std::int64_t>::max()) return;
  throw std::invalid_argument(std::string("attention: ") + name + " contains NaN or Inf (head " +
                              std::to_string(flat / len) + ", row " + std::to_string(flat % len) +
                              "); expected finite values");
}

}  // namespace
}  // namespace tilesplash::kernel
