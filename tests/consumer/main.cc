// Causal attention with all-zero queries: every kept key scores the same, so
// row q is the plain mean of V rows 0..q and its LSE is log(q + 1).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "tilesplash/tilesplash.h"

int main() {
  constexpr std::int64_t n = 16, d = 8;
  std::vector<float> q(n * d, 0.0f), k(n * d), v(n * d), out(n * d), lse(n);
  for (std::int64_t i = 0; i < n * d; ++i) {
    k[i] = static_cast<float>(i % 7) * 0.25f;
    v[i] = static_cast<float>(i / d);  // V row r is all r
  }
  const auto plan = tilesplash::TilePlan::build(tilesplash::Mask::causal(), n, n, {8, 64});
  using tilesplash::DType;
  using tilesplash::TensorView;
  tilesplash::attention_forward(
      plan,
      {TensorView::contiguous(q.data(), DType::kF32, 1, n, d),
       TensorView::contiguous(k.data(), DType::kF32, 1, n, d),
       TensorView::contiguous(v.data(), DType::kF32, 1, n, d),
       tilesplash::MutableTensorView::contiguous(out.data(), DType::kF32, 1, n, d), lse.data()});

  const std::int64_t row = 9;
  const double want = row / 2.0;  // mean of 0..9
  const double got = out[row * d + 3];
  const bool ok = std::fabs(got - want) < 1e-5 && std::fabs(lse[row] - std::log(row + 1.0)) < 1e-5;
  std::printf("tilesplash %s on %s: out[%lld][3] = %.6f (want %.6f) -> %s\n", tilesplash::kVersion,
              tilesplash::active_isa().c_str(), static_cast<long long>(row), got, want,
              ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
