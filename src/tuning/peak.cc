// measure_peak_gflops: times the active target's multiply-add loop on
// `threads` workers that start together and stop at one shared deadline, so
// the result is the aggregate rate of the cores running at the same time (and
// at the clock they hold under that load), not one core's rate times threads.
// The workers are the threads of a ThreadingContext (the caller's, or the
// default), each pinned to a core of its own for the measurement (when there
// are enough) and given back its CPUs afterwards, so two workers never share
// a core while another stands idle. The time is split
// into several short windows and the best one is reported: a peak is an upper
// bound, and on a shared machine any other process that steals a core for a
// moment spoils a window, not the whole measurement.
#include "tilesplash/peak.h"

#include <time.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernel/isa_dispatch.h"
#include "runtime/cpu_affinity.h"
#include "tilesplash/attention.h"
#include "tilesplash/threading.h"

namespace tilesplash {
namespace {

using Clock = std::chrono::steady_clock;

// Workers look at the clock once per chunk; a chunk of ~0.5 ms keeps the
// overshoot past the deadline and the cost of reading the clock negligible.
constexpr double kChunkSeconds = 5e-4;
constexpr std::int64_t kCalibrationRounds = 1 << 14;
// Up to kMaxWindows windows of at least this long each.
constexpr double kWindowSeconds = 0.025;
constexpr double kMaxWindows = 8.0;

// Keeps every loop's result observable.
volatile float g_sink = 0.0f;

// The f32 loop also stands for f16 (widened to f32) and for bf16 where it is
// widened; where bf16 takes the target's dot product, its own loop.
kernel::FmaLoop select_loop(DType dtype, ProductPath product_path) {
  const kernel::TargetOps& target = kernel::active_target();
  if (dtype == DType::kBF16 && choose_product_path(product_path).path == ProductPath::kDot) {
    return target.bf16_peak;
  }
  return target.f32_peak;
}

// CPU time of the calling thread: unlike the wall clock, it stops while the
// thread waits for a core another process holds.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Rounds per chunk, from one timed single-threaded run (after a warm-up run
// that brings the vector units and the clock up).
std::int64_t rounds_per_chunk(const kernel::FmaLoop& loop) {
  g_sink = g_sink + loop.run(kCalibrationRounds);
  const auto start = Clock::now();
  g_sink = g_sink + loop.run(kCalibrationRounds);
  const double elapsed = std::max(seconds_since(start), 1e-9);
  const double rounds = kCalibrationRounds * kChunkSeconds / elapsed;
  return static_cast<std::int64_t>(std::clamp(rounds, 1024.0, 1e8));
}

PeakMeasurement measure_loop(const kernel::FmaLoop& loop, int threads, double seconds,
                             ThreadingContext* context);

}  // namespace

double measure_peak_gflops(DType dtype, int threads, double seconds, ThreadingContext* context,
                           ProductPath product_path) {
  return measure_peak(dtype, threads, seconds, context, product_path).gflops;
}

PeakMeasurement measure_peak(DType dtype, int threads, double seconds, ThreadingContext* context,
                             ProductPath product_path) {
  if (!std::isfinite(seconds) || seconds <= 0.0) {
    throw std::invalid_argument("measure_peak_gflops: seconds must be a finite value > 0");
  }
  return measure_loop(select_loop(dtype, product_path), threads, seconds, context);
}

PeakMeasurement measure_int8_peak(int threads, double seconds, ThreadingContext* context) {
  if (!std::isfinite(seconds) || seconds <= 0.0) {
    throw std::invalid_argument("measure_int8_peak: seconds must be a finite value > 0");
  }
  return measure_loop(kernel::active_target().int8_peak, threads, seconds, context);
}

namespace {

PeakMeasurement measure_loop(const kernel::FmaLoop& loop, int threads, double seconds,
                             ThreadingContext* context) {
  ThreadingContext& threading = context != nullptr ? *context : *default_threading_context();
  threads = threading.resolve(std::max(threads, 0));

  const std::int64_t chunk = rounds_per_chunk(loop);
  const int windows = static_cast<int>(std::clamp(seconds / kWindowSeconds, 1.0, kMaxWindows));
  const auto window =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds / windows));

  std::vector<Clock::time_point> starts(windows);
  std::vector<Clock::time_point> deadlines(windows);
  std::vector<std::vector<std::int64_t>> rounds(windows, std::vector<std::int64_t>(threads, 0));
  std::vector<std::vector<Clock::time_point>> finished(windows,
                                                       std::vector<Clock::time_point>(threads));
  std::vector<std::vector<double>> cpu_seconds(windows, std::vector<double>(threads, 0.0));
  std::vector<float> results(threads, 0.0f);

  // The completion step runs once per phase, after every worker has arrived
  // and before any is released, so each window starts at one instant for all.
  int phase = 0;
  auto open_window = [&]() noexcept {
    if (phase < windows) {
      starts[phase] = Clock::now();
      deadlines[phase] = starts[phase] + window;
    }
    ++phase;
  };
  std::barrier sync(threads, open_window);

  const std::vector<int> cpus = runtime::allowed_cpus();
  const bool pin = static_cast<int>(cpus.size()) >= threads;
  threading.run_together(threads, [&](int t) {
    std::optional<runtime::ScopedPin> pinned;
    if (pin) pinned.emplace(cpus[static_cast<std::size_t>(t)]);
    results[t] += loop.run(chunk);  // warm-up, outside the timed windows
    for (int w = 0; w < windows; ++w) {
      sync.arrive_and_wait();
      const double cpu_start = thread_cpu_seconds();
      std::int64_t done = 0;
      do {
        results[t] += loop.run(chunk);
        done += chunk;
      } while (Clock::now() < deadlines[w]);
      finished[w][t] = Clock::now();
      cpu_seconds[w][t] = thread_cpu_seconds() - cpu_start;
      rounds[w][t] = done;
    }
  });

  PeakMeasurement best;
  for (int w = 0; w < windows; ++w) {
    double flops = 0.0;
    double cpu_rate = 0.0;  // each worker's flops over its own CPU time, summed
    Clock::time_point last = starts[w];
    for (int t = 0; t < threads; ++t) {
      const double worker_flops = static_cast<double>(rounds[w][t]) * loop.flops_per_round;
      flops += worker_flops;
      cpu_rate += worker_flops / std::max(cpu_seconds[w][t], 1e-9);
      last = std::max(last, finished[w][t]);
    }
    const double elapsed = std::chrono::duration<double>(last - starts[w]).count();
    best.gflops = std::max(best.gflops, flops / std::max(elapsed, 1e-9) * 1e-9);
    best.cpu_gflops = std::max(best.cpu_gflops, cpu_rate * 1e-9);
  }
  float sum = 0.0f;
  for (float result : results) sum += result;
  g_sink = g_sink + sum;
  return best;
}

}  // namespace
}  // namespace tilesplash
