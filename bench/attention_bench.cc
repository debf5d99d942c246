// Google Benchmark suite for the kernel. Reports GFLOP/s on the pairs actually
// computed (4 * d flops per kept pair) so sparse and dense runs compare
// directly; the CLI's `tilesplash bench` gives the same figures with the
// machine's measured peak and the dense ratio. Run with
//   build/bench/tilesplash_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "tilesplash/tilesplash.h"

namespace {

using tilesplash::DType;

struct Inputs {
  std::vector<std::uint16_t> half_q, half_k, half_v;
  std::vector<float> q, k, v, out;
};

Inputs make_inputs(std::int64_t n, std::int64_t d, DType dtype) {
  Inputs in;
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto fill = [&](std::vector<float>& f, std::vector<std::uint16_t>& h) {
    f.resize(n * d);
    for (float& x : f) x = normal(rng);
    if (dtype == DType::kBF16) {
      h.resize(n * d);
      for (std::int64_t i = 0; i < n * d; ++i) h[i] = tilesplash::float_to_bf16(f[i]);
    }
  };
  fill(in.q, in.half_q);
  fill(in.k, in.half_k);
  fill(in.v, in.half_v);
  in.out.resize(n * d);
  return in;
}

// Args: n, d, dtype (0 f32, 1 bf16), threads, mask (0 dense, 1 band 25%), mode.
void BM_Attention(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const std::int64_t d = state.range(1);
  const DType dtype = state.range(2) == 0 ? DType::kF32 : DType::kBF16;
  const int threads = static_cast<int>(state.range(3));
  // A symmetric band keeping ~25% of the map: W = N (1 - sqrt(0.75)) / 1.
  const std::int64_t half_width = static_cast<std::int64_t>(n * (1.0 - 0.8660254037844386));
  const tilesplash::Mask mask = state.range(4) == 0
                                    ? tilesplash::Mask::dense()
                                    : tilesplash::Mask::local(half_width, half_width);
  const auto mode = static_cast<tilesplash::MaskMode>(state.range(5));
  const tilesplash::TilePlan plan = tilesplash::TilePlan::build(mask, n, n, {128, 128});
  Inputs in = make_inputs(n, d, dtype);
  const bool half = dtype == DType::kBF16;
  tilesplash::AttentionArgs args;
  args.q = tilesplash::TensorView::contiguous(half ? (const void*)in.half_q.data() : in.q.data(),
                                              dtype, 1, n, d);
  args.k = tilesplash::TensorView::contiguous(half ? (const void*)in.half_k.data() : in.k.data(),
                                              dtype, 1, n, d);
  args.v = tilesplash::TensorView::contiguous(half ? (const void*)in.half_v.data() : in.v.data(),
                                              dtype, 1, n, d);
  args.out = tilesplash::MutableTensorView::contiguous(in.out.data(), DType::kF32, 1, n, d);
  tilesplash::AttentionOptions options;
  options.threads = threads;
  options.mask_mode = mode;
  tilesplash::AttentionRunner runner;
  runner.forward(plan, args, options);  // warm up: workspaces, page faults
  for (auto _ : state) {
    runner.forward(plan, args, options);
    benchmark::DoNotOptimize(in.out.data());
  }
  const double flops = 4.0 * static_cast<double>(d) * static_cast<double>(plan.stats().kept_pairs);
  state.counters["GFLOPs"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["density"] = plan.stats().density;
  state.SetLabel(tilesplash::active_isa());
}

BENCHMARK(BM_Attention)
    ->ArgNames({"n", "d", "bf16", "threads", "band", "mode"})
    ->Args({8192, 128, 0, 1, 0, 0})
    ->Args({8192, 128, 1, 1, 0, 0})
    ->Args({8192, 128, 0, 2, 0, 0})
    ->Args({8192, 128, 1, 2, 0, 0})
    ->Args({8192, 64, 0, 1, 0, 0})
    ->Args({32760, 128, 1, 2, 1, 0})
    ->Args({32760, 128, 1, 2, 1, 1})
    ->Args({32760, 64, 1, 2, 1, 0})
    ->Args({32760, 64, 1, 2, 1, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
