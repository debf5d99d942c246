// Google Benchmark suite for the kernel, on every SIMD target this CPU runs
// (the same targets the tests cover, from available_isas()). Reports GFLOP/s
// on the pairs actually computed (4 * d flops per kept pair), the FMA peak
// measured in this process for the same target, dtype and thread count, and
// their ratio, so runs on different machines and targets compare directly.
// Tiles are the ones tilesplash picks by itself (heuristic_blocks). The CLI's
// `tilesplash bench` gives the same figures for any shape, with the dense
// ratio. Run with
//   build/bench/tilesplash_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// and --benchmark_filter=avx2/ (say) for one target.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "tilesplash/tilesplash.h"

namespace {

using tilesplash::DType;

struct Case {
  const char* name;
  std::int64_t n, d, heads;
  DType dtype;
  int threads;
  double band_density;  // 0: dense, else a symmetric band keeping this share of the map
  tilesplash::MaskMode mode = tilesplash::MaskMode::kTile;
};

// The issue-13 cases: dense N = 8192 at d = 128 and 64, one head per thread,
// and the 25% band over Wan 2.1 1.3B's 32,760 tokens.
const Case kCases[] = {
    {"dense_f32_d128_t1", 8192, 128, 1, DType::kF32, 1, 0.0},
    {"dense_f32_d64_t1", 8192, 64, 1, DType::kF32, 1, 0.0},
    {"dense_bf16_d128_t1", 8192, 128, 1, DType::kBF16, 1, 0.0},
    {"dense_f32_d128_h2_t2", 8192, 128, 2, DType::kF32, 2, 0.0},
    {"dense_bf16_d128_h2_t2", 8192, 128, 2, DType::kBF16, 2, 0.0},
    {"band25_f32_d128_t2", 32760, 128, 1, DType::kF32, 2, 0.25},
    {"band25_bf16_d128_t2", 32760, 128, 1, DType::kBF16, 2, 0.25},
    {"band25_bf16_d64_t2", 32760, 64, 1, DType::kBF16, 2, 0.25},
    {"band25_bf16_d128_t2_element", 32760, 128, 1, DType::kBF16, 2, 0.25,
     tilesplash::MaskMode::kElement},
};

struct Inputs {
  std::vector<float> q, k, v, out;
  std::vector<std::uint16_t> half_q, half_k, half_v;
};

Inputs make_inputs(const Case& c) {
  Inputs in;
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::int64_t elements = c.heads * c.n * c.d;
  auto fill = [&](std::vector<float>& f, std::vector<std::uint16_t>& h) {
    f.resize(elements);
    for (float& x : f) x = normal(rng);
    if (c.dtype == DType::kBF16) {
      h.resize(elements);
      for (std::int64_t i = 0; i < elements; ++i) h[i] = tilesplash::float_to_bf16(f[i]);
    }
  };
  fill(in.q, in.half_q);
  fill(in.k, in.half_k);
  fill(in.v, in.half_v);
  in.out.resize(elements);
  return in;
}

// The peak of one (target, dtype, threads), measured once per process.
double peak_gflops(const std::string& isa, DType dtype, int threads) {
  static std::map<std::tuple<std::string, DType, int>, double> cache;
  const auto key = std::make_tuple(isa, dtype, threads);
  auto it = cache.find(key);
  if (it == cache.end()) {
    it = cache.emplace(key, tilesplash::measure_peak_gflops(dtype, threads, 0.4)).first;
  }
  return it->second;
}

void run_case(benchmark::State& state, const std::string& isa, const Case& c) {
  tilesplash::set_isa(isa);
  // W = N (1 - sqrt(1 - s)) keeps a share s of the map.
  const auto half_width = static_cast<std::int64_t>(c.n * (1.0 - std::sqrt(1.0 - c.band_density)));
  const tilesplash::Mask mask = c.band_density == 0.0
                                    ? tilesplash::Mask::dense()
                                    : tilesplash::Mask::local(half_width, half_width);
  const tilesplash::BlockSizes blocks = tilesplash::heuristic_blocks(c.n, c.n, c.d, c.dtype);
  const tilesplash::TilePlan plan = tilesplash::TilePlan::build(mask, c.n, c.n, blocks);
  Inputs in = make_inputs(c);
  const bool half = c.dtype == DType::kBF16;
  auto view = [&](const std::vector<float>& f, const std::vector<std::uint16_t>& h) {
    return tilesplash::TensorView::contiguous(half ? static_cast<const void*>(h.data()) : f.data(),
                                              c.dtype, c.heads, c.n, c.d);
  };
  tilesplash::AttentionArgs args;
  args.q = view(in.q, in.half_q);
  args.k = view(in.k, in.half_k);
  args.v = view(in.v, in.half_v);
  args.out =
      tilesplash::MutableTensorView::contiguous(in.out.data(), DType::kF32, c.heads, c.n, c.d);
  tilesplash::AttentionOptions options;
  options.threads = c.threads;
  options.mask_mode = c.mode;
  tilesplash::AttentionRunner runner;
  runner.forward(plan, args, options);  // warm up: workspaces, page faults, the finite check
  options.check_finite = false;
  double seconds = 0.0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    runner.forward(plan, args, options);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    benchmark::DoNotOptimize(in.out.data());
  }
  const double flops = 4.0 * static_cast<double>(c.d) * static_cast<double>(c.heads) *
                       static_cast<double>(plan.stats().kept_pairs);
  const double gflops =
      flops * static_cast<double>(state.iterations()) / std::max(seconds, 1e-12) * 1e-9;
  const double peak = peak_gflops(isa, c.dtype, c.threads);
  state.counters["GFLOPs"] = gflops;
  state.counters["peak_GFLOPs"] = peak;
  state.counters["efficiency"] = gflops / peak;
  state.counters["density"] = plan.stats().density;
  state.SetLabel(std::to_string(blocks.block_q) + "x" + std::to_string(blocks.block_kv));
  tilesplash::set_isa("");
}

}  // namespace

int main(int argc, char** argv) {
  for (const std::string& isa : tilesplash::available_isas()) {
    for (const Case& c : kCases) {
      benchmark::RegisterBenchmark((isa + "/" + c.name).c_str(),
                                   [isa, c](benchmark::State& state) { run_case(state, isa, c); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
