// The machine's multiply-add peak, measured in-process, so that benchmark
// efficiencies are relative to this run on this CPU rather than a datasheet.
#pragma once

#include "tilesplash/attention_args.h"
#include "tilesplash/tensor.h"
#include "tilesplash/threading.h"

namespace tilesplash {

// GFLOP/s (2 flops per multiply-add) of a register-resident FMA loop on the
// active ISA: f32 FMA for f32 and f16 (which the kernel widens to f32), and
// for bf16 the loop of the path bf16 takes (choose_product_path(product_path),
// attention.h): BF16 dot products, or the f32 FMA when bf16 is widened. `threads` threads of
// `context` (null: default_threading_context()) run at once (< 1: the context's threads()), each
// pinned to a core of its own for the measurement when the process may use that many. The time is
// split into short windows and the best window is reported, since a peak is an upper bound and a
// briefly stolen core should spoil one window, not the result. Throws std::invalid_argument unless
// `seconds` is finite and > 0, and std::logic_error when called from inside a parallel region of
// the same context.
double measure_peak_gflops(DType dtype, int threads, double seconds = 0.2,
                           ThreadingContext* context = nullptr,
                           ProductPath product_path = ProductPath::kAuto);

struct PeakMeasurement {
  double gflops = 0.0;  // measure_peak_gflops(): the rate of the wall-clock windows
  // The same loop against each worker's own CPU time (summed over workers):
  // what the cores do while they run, whatever other processes take from them.
  // On a loaded machine compare it with CPU-time kernel rates.
  double cpu_gflops = 0.0;
};

// Both rates from one measurement (same arguments as measure_peak_gflops).
PeakMeasurement measure_peak(DType dtype, int threads, double seconds = 0.2,
                             ThreadingContext* context = nullptr,
                             ProductPath product_path = ProductPath::kAuto);

// The same for int8 multiply-adds (GOP/s, 2 operations each): vpdpbusd where
// the target has VNNI, the int8 path's Q.K^T rate (Precision::kInt8).
PeakMeasurement measure_int8_peak(int threads, double seconds = 0.2,
                                  ThreadingContext* context = nullptr);

}  // namespace tilesplash
