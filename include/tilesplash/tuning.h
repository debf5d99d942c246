// Tile-size autotuning. The fastest (block_q, block_kv) is a property of the
// machine, not of the mask: small tiles hug the mask boundary (fewer wasted
// pairs in partial tiles) while large ones run long dense loops, and the
// article found its TPU optimum at a query tile of 3,328 (26 x 128, on TPU
// v6e), far from the tile with the least boundary work. So the library keeps one list of
// candidate tile sizes, times each candidate on a stratified sample of its
// plan's q-blocks (seconds for a 75k-token shape, where the full runs would
// take minutes), extrapolates to the full run, then times the kernel's loop
// variants (kernel_variants(): what suits a Zen 4 and what suits two 512-bit
// FMA ports differ) at the winning tiles, and caches both on disk keyed by
// CPU, SIMD target, product path, dtype, head dim, mask family, length
// bucket and threads. choose_blocks() is the entry point for callers that give no block
// sizes: the cached choice when there is one, a heuristic otherwise; it never
// tunes implicitly.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tilesplash/attention_args.h"
#include "tilesplash/mask.h"
#include "tilesplash/plan.h"
#include "tilesplash/tensor.h"
#include "tilesplash/threading.h"

namespace tilesplash {

class AttentionBackend;  // backend.h

// Every candidate the tuner may try, small tiles first. The one list that
// the tuner, the CLI and the tests iterate over (gemma.cpp's MMCandidates).
std::span<const BlockSizes> tile_candidates();
// The candidates that differ for these lengths: a block_q (block_kv) beyond
// the length rounded up to the kernel's granularity gives the same plan as a
// smaller one, so only the smallest such candidate stays. Never empty.
std::vector<BlockSizes> tile_candidates_for(std::int64_t q_len, std::int64_t kv_len);
// The kernel's loop variants the tuner times (KernelVariant, attention_args.h),
// the default first: register tiles of 6 rows one at a time, 2 or 4 per pass,
// each with and without prefetching the next tile.
std::span<const KernelVariant> kernel_variants();

// What a tuned choice is valid for. Two shapes with equal keys share a cache
// entry; any field that differs keeps them apart.
struct TuneKey {
  std::string backend = "cpu";  // AttentionBackend::name() (backend.h) of what ran the timings
  std::string cpu;              // the device: /proc/cpuinfo "model name", or "unknown"
  std::string isa;              // the backend's code path: active_isa() on the CPU
  // What the products run on (kernel_path_key): "fma", "bf16-dot", and for
  // Precision::kInt8 "int8+" either; timings of one say nothing of another.
  std::string path = "fma";
  DType dtype = DType::kF32;
  std::int64_t head_dim = 0;
  std::string mask_family;     // mask.to_string() with numbers replaced by '#'
  double density = 0.0;        // estimated kept fraction, bucketed (see density_bucket)
  std::int64_t q_bucket = 0;   // floor(log2(q_len))
  std::int64_t kv_bucket = 0;  // floor(log2(kv_len))
  int threads = 1;

  // One line, stable across runs: the cache's key.
  std::string to_string() const;
  friend bool operator==(const TuneKey&, const TuneKey&) = default;
};

// The device-independent part of every backend's tuning key: the fields of
// TuneKey that depend on the mask and lengths only. make_tune_key takes them
// from here, and so does the flex backend's key (python/tilesplash/_flex/
// tuning.py, through tilesplash._core.tune_shape), so the two cannot drift.
struct TuneShape {
  std::string mask_family;  // mask.to_string() with numbers replaced by '#'
  double density = 0.0;     // estimate_density, bucketed (density_bucket)
  std::int64_t q_bucket = 0;
  std::int64_t kv_bucket = 0;
};
// Throws std::invalid_argument on lengths < 1.
TuneShape make_tune_shape(const Mask& mask, std::int64_t q_len, std::int64_t kv_len);

// The key of a shape timed on `backend`: its name(), device_name() and
// code_path() (backend.h) fill backend, cpu and isa. threads: 0 means
// hardware_threads(). Throws std::invalid_argument on lengths or head_dim < 1
// and threads < 0. For bf16 the product path is choose_product_path()'s
// (attention.h), which may measure it once.
TuneKey make_tune_key(const AttentionBackend& backend, const Mask& mask, std::int64_t q_len,
                      std::int64_t kv_len, std::int64_t head_dim, DType dtype, int threads,
                      Precision precision = Precision::kDefault);
// The same on the CPU backend (make_backend("cpu")): what the library's own
// calls look up.
TuneKey make_tune_key(const Mask& mask, std::int64_t q_len, std::int64_t kv_len,
                      std::int64_t head_dim, DType dtype, int threads,
                      Precision precision = Precision::kDefault);
// TuneKey::path for a dtype and precision on the active target.
std::string kernel_path_key(DType dtype, Precision precision);

// Kept fraction estimated from a few hundred evenly spaced rows (cheap for
// any mask), and its bucket: the nearest 0.01 below 0.05, else 0.05.
double estimate_density(const Mask& mask, std::int64_t q_len, std::int64_t kv_len);
double density_bucket(double density);

// What a measurement reads. kWall is what a caller waits for. kCpu is the
// process's CPU time divided by the thread count: on a machine shared with
// other jobs it counts only this process's work, so candidates compare
// fairly, but it misses threads left idle by an unbalanced split.
enum class TuneClock : std::uint8_t { kWall, kCpu };

struct TuneOptions {
  std::int64_t heads = 2;        // heads timed per call (>= 1)
  int threads = 0;               // 0: the context's threads() (all hardware threads by default)
  double budget_seconds = 10.0;  // sampled timing of all candidates (> 0)
  int repeats = 3;               // timed runs per measurement; the minimum counts (>= 1)
  TuneClock clock = TuneClock::kWall;
  // Also time the pick (and the least-boundary candidate) on the full run.
  bool verify = false;
  // Time every candidate on the full run as well (slow: for benchmarks).
  bool exhaustive = false;
  std::uint64_t seed = 0;                     // of the random Q, K, V
  Precision precision = Precision::kDefault;  // of the timed calls (and the key)
  // Candidates to try instead of tile_candidates_for(); each must satisfy the
  // kernel's limits (tilesplash/kernel_limits.h: block_kv a multiple of 64 up
  // to 1024, block_q 1 to 4096).
  std::vector<BlockSizes> candidates;
  // Loop variants to time at the fastest tiles instead of kernel_variants();
  // a single one skips that stage (the tiles are timed with the first).
  std::vector<KernelVariant> variants;
};

struct CandidateResult {
  BlockSizes blocks;
  KernelVariant variant;
  std::int64_t full = 0;
  std::int64_t partial = 0;
  std::int64_t empty = 0;
  std::int64_t kept_pairs = 0;
  std::int64_t boundary_pairs = 0;  // pairs computed in partial tiles that the mask drops
  std::int64_t sampled_q_blocks = 0;
  std::int64_t q_blocks = 0;
  double sample_fraction = 0.0;        // share of the visited pairs the sample ran
  double seconds = 0.0;                // full-run time predicted from the sample
  double gflops = 0.0;                 // 4 * d * heads * kept_pairs / seconds
  std::optional<double> full_seconds;  // measured on the full run (verify / exhaustive)
};

struct TuneResult {
  TuneKey key;
  std::int64_t q_len = 0;
  std::int64_t kv_len = 0;
  std::int64_t heads = 0;
  // The tile candidates in list order (with the first variant), then the
  // other variants at the fastest of those tiles.
  std::vector<CandidateResult> candidates;
  std::size_t best = 0;            // fastest predicted
  std::size_t least_boundary = 0;  // fewest boundary pairs (the smaller tile on a tie)
  double fixed_seconds = 0.0;      // per call outside the tiles (K/V packing, rows), measured once
  double tuning_seconds = 0.0;     // wall time of tune_blocks()
  double search_seconds = 0.0;     // of which the search itself (without verify / exhaustive)

  BlockSizes blocks() const { return candidates[best].blocks; }
  KernelVariant variant() const { return candidates[best].variant; }
};

// Times every candidate on a stratified sample of q-blocks with random data
// and returns the table; does not touch the cache. Times on `context` (null:
// default_threading_context()). Throws std::invalid_argument naming the bad
// argument or option.
TuneResult tune_blocks(const Mask& mask, std::int64_t q_len, std::int64_t kv_len,
                       std::int64_t head_dim, DType dtype, const TuneOptions& options = {},
                       ThreadingContext* context = nullptr);

// A cached choice: the tiles and the loop variant to run them with.
struct TunedChoice {
  BlockSizes blocks;
  KernelVariant variant;
};

// The on-disk cache: one versioned JSON file. A corrupt, unreadable or stale
// (other format version or library version) file, or an entry with invalid
// block sizes or variant, is ignored with one warning on stderr, never
// trusted; storing rewrites the file atomically (temporary file + rename).
// The same file keeps the kernel's product-path calibration per CPU model
// (choose_product_path(), attention.h).
class TuningCache {
 public:
  // $XDG_CACHE_HOME/tilesplash/tuning.json, else $HOME/.cache/tilesplash/tuning.json.
  static std::filesystem::path default_path();
  explicit TuningCache(std::filesystem::path path = default_path());

  const std::filesystem::path& path() const { return path_; }
  std::optional<BlockSizes> lookup(const TuneKey& key) const;
  // The blocks and the variant (the default one for an entry without).
  std::optional<TunedChoice> lookup_choice(const TuneKey& key) const;
  // Adds or replaces the entry. Throws std::runtime_error naming the path when
  // the file cannot be written.
  // Concurrent stores (threads or processes) serialise on an flock of
  // "<path>.lock", so none loses another's entry.
  void store(const TuneKey& key, BlockSizes blocks, double seconds,
             const KernelVariant& variant = {}) const;
  // Creates the directory and proves a file can be written there; throws
  // std::invalid_argument naming the path otherwise. For callers that tune
  // for minutes before storing: fail first, not after.
  void check_writable() const;

 private:
  std::filesystem::path path_;
};

// Block sizes when the caller gives none: a sensible default for the lengths.
BlockSizes heuristic_blocks(std::int64_t q_len, std::int64_t kv_len, std::int64_t head_dim,
                            DType dtype);

struct BlockChoice {
  BlockSizes blocks;
  KernelVariant variant;  // the tuned one, else the default
  bool from_cache = false;
  TuneKey key;
};
// The cached choice for this shape on this machine, else heuristic_blocks()
// and the default variant. Reads the cache file on every call: call it once
// per shape, not per forward.
BlockChoice choose_blocks(const Mask& mask, std::int64_t q_len, std::int64_t kv_len,
                          std::int64_t head_dim, DType dtype, int threads,
                          Precision precision = Precision::kDefault);

// choose_blocks(), remembered per (mask, lengths, head dim, dtype, threads,
// precision, target) for the life of the process: choose_blocks reads the
// tuning file, which a call per layer and step should not. A `tilesplash
// tune` run during the process is seen by the next process.
BlockChoice cached_block_choice(const Mask& mask, std::int64_t q_len, std::int64_t kv_len,
                                std::int64_t head_dim, DType dtype, int threads,
                                Precision precision = Precision::kDefault);

// Tile sizes a caller asked for, against the kernel's limits (block_q 1 to
// 4096, block_kv a multiple of 64 up to 1024); std::invalid_argument naming
// block_q or block_kv otherwise. Unset sides pass.
void check_block_sizes(std::optional<std::int64_t> block_q, std::optional<std::int64_t> block_kv);

}  // namespace tilesplash
