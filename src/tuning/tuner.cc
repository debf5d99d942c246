// tune_blocks(): every candidate tile size timed on a stratified sample of its
// own plan's q-blocks, extrapolated to the full run.
//
// A run of a plan costs fixed + tiles: `fixed` is the work outside the tiles
// (packing K and V, loading and writing every row), the same for every plan
// over the shape, and `tiles` is the sum over (head, q-block) items. A sampled
// plan (tuning/sample_plan.h) keeps the fixed part and a known share of the
// visited pairs, so full = fixed + (sample - fixed) * visited / sampled.
// `fixed` is measured once, on a plan with no tiles. Samples are sized from
// the budget with a throughput measured by a first small probe, and at least
// a few q-blocks per thread, so each is long enough to time. The minimum of
// the repeats counts: on a shared machine noise only ever adds time (and
// TuneClock::kCpu reads CPU time, which other jobs barely disturb).
//
// Then the kernel's loop variants (kernel_variants()) are timed the same way
// at the fastest tiles: they change how a tile's K and V travel from L2 to
// L1, which matters per CPU family rather than per tile size, so one more
// row per variant (not a product with every tile) is enough.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "masks/mask_util.h"
#include "tilesplash/attention.h"
#include "tilesplash/kernel_limits.h"
#include "tilesplash/threading.h"
#include "tilesplash/tuning.h"
#include "tuning/sample_plan.h"

namespace tilesplash {
namespace {

using Clock = std::chrono::steady_clock;

// Each sample should hold at least this many q-blocks per worker thread, so
// that the threads stay balanced as they are in the full run.
constexpr std::int64_t kMinBlocksPerThread = 2;
constexpr std::int64_t kMinBlocks = 4;
// The fixed part is cheap; more repeats make it exact enough to subtract.
constexpr int kFixedRepeats = 5;

void fail(const std::string& message) { throw std::invalid_argument("tune_blocks: " + message); }

void validate(std::int64_t q_len, std::int64_t kv_len, std::int64_t head_dim,
              const TuneOptions& o) {
  if (q_len < 1) fail("q_len must be >= 1, got " + std::to_string(q_len));
  if (kv_len < 1) fail("kv_len must be >= 1, got " + std::to_string(kv_len));
  if (!kernel_limits::valid_head_dim(head_dim)) {
    fail("head_dim must be " + kernel_limits::head_dim_rule() + ", got " +
         std::to_string(head_dim));
  }
  if (o.heads < 1) fail("options.heads must be >= 1, got " + std::to_string(o.heads));
  if (o.threads < 0) fail("options.threads must be >= 0, got " + std::to_string(o.threads));
  if (!(o.budget_seconds > 0.0) || !std::isfinite(o.budget_seconds)) {
    fail("options.budget_seconds must be a finite number > 0, got " +
         std::to_string(o.budget_seconds));
  }
  if (o.repeats < 1) fail("options.repeats must be >= 1, got " + std::to_string(o.repeats));
  for (const KernelVariant& v : o.variants) {
    if (v.row_groups != 1 && v.row_groups != 2 && v.row_groups != 4) {
      fail("options.variants: row_groups must be 1, 2 or 4, got " + std::to_string(v.row_groups));
    }
  }
  for (const BlockSizes& b : o.candidates) {
    if (!kernel_limits::valid_block_q(b.block_q) || !kernel_limits::valid_block_kv(b.block_kv)) {
      fail("options.candidates: each needs block_q " + kernel_limits::block_q_rule() +
           " and block_kv " + kernel_limits::block_kv_rule() + ", got " +
           std::to_string(b.block_q) + " x " + std::to_string(b.block_kv));
    }
  }
}

// Seeded uniform values of unit variance in the kernel's input dtype: the
// values do not matter for speed, only that they are finite and varied.
class RandomInputs {
 public:
  RandomInputs(DType dtype, std::int64_t heads, std::int64_t len, std::int64_t dim,
               std::uint64_t seed)
      : dtype_(dtype), heads_(heads), len_(len), dim_(dim) {
    const std::size_t n = static_cast<std::size_t>(heads * len * dim);
    const auto value = [seed](std::size_t i) {
      const std::uint64_t bits = detail::mix64(seed ^ detail::mix64(i));
      return static_cast<float>((static_cast<double>(bits >> 11) * 0x1.0p-53 - 0.5) * 3.4641016);
    };
    if (dtype == DType::kF32) {
      f32_.resize(n);
      for (std::size_t i = 0; i < n; ++i) f32_[i] = value(i);
    } else {
      bits16_.resize(n);
      for (std::size_t i = 0; i < n; ++i) {
        bits16_[i] = dtype == DType::kBF16 ? float_to_bf16(value(i)) : float_to_f16(value(i));
      }
    }
  }

  TensorView view() const {
    const void* data = dtype_ == DType::kF32 ? static_cast<const void*>(f32_.data())
                                             : static_cast<const void*>(bits16_.data());
    return TensorView::contiguous(data, dtype_, heads_, len_, dim_);
  }

 private:
  DType dtype_;
  std::int64_t heads_, len_, dim_;
  std::vector<float> f32_;
  std::vector<std::uint16_t> bits16_;
};

class Timer {
 public:
  Timer(AttentionBackend& runner, const AttentionArgs& args, int threads, TuneClock clock,
        Precision precision)
      : runner_(runner), args_(args), clock_(clock), threads_(threads) {
    options_.threads = threads;
    options_.check_finite = false;  // the data is finite by construction
    options_.precision = precision;
  }

  void use(const KernelVariant& variant) { options_.variant = variant; }

  // Minimum over `repeats` runs.
  double seconds(const TilePlan& plan, int repeats) {
    double best = std::numeric_limits<double>::infinity();
    for (int r = 0; r < repeats; ++r) {
      const double start = now();
      runner_.forward(plan, args_, options_);
      best = std::min(best, now() - start);
    }
    return std::max(best, 1e-9);
  }

 private:
  double now() const {
    if (clock_ == TuneClock::kWall) {
      return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
    }
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec)) / threads_;
  }

  AttentionBackend& runner_;
  const AttentionArgs& args_;
  AttentionOptions options_;
  TuneClock clock_;
  int threads_;
};

// The tile part of a sampled run. Noise can make t - fixed tiny or negative
// when a sample is short; the floor keeps the throughput estimate (and so the
// next sample's size) from running away.
double tile_seconds(double t, double fixed) { return std::max(t - fixed, 0.05 * t); }

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Number of q-blocks to sample for `target_pairs` visited pairs per head.
std::int64_t sample_count(const std::vector<std::int64_t>& work, double target_pairs,
                          std::int64_t heads, int threads) {
  const std::int64_t n = static_cast<std::int64_t>(work.size());
  const double total =
      static_cast<double>(std::accumulate(work.begin(), work.end(), std::int64_t{0}));
  const double mean = std::max(total / static_cast<double>(n), 1.0);
  std::int64_t count = static_cast<std::int64_t>(std::ceil(target_pairs / mean));
  // A few strata, but no more than an eighth of the plan: with the 3,328-row
  // tiles a long sequence has only ~20 q-blocks.
  const std::int64_t floor_count =
      std::max(ceil_div(kMinBlocksPerThread * threads, heads), std::min(kMinBlocks, n / 8));
  count = std::max(count, floor_count);
  // Whole rounds of items per thread when the blocks cost the same.
  while ((count * heads) % threads != 0) ++count;
  return std::min(count, n);
}

struct Candidate {
  CandidateResult result;
  std::int64_t visited = 0;
};

// The timing of candidates, one after another, and what one measurement
// tells the next: the fixed part (measured once), the throughput that sizes
// the next sample, and the time spent on full runs (verify / exhaustive),
// which is not search time.
class Search {
 public:
  Search(const Mask& mask, std::int64_t q_len, std::int64_t kv_len, const TuneOptions& options,
         Timer& timer, int threads, double per_candidate)
      : mask_(mask),
        q_len_(q_len),
        kv_len_(kv_len),
        options_(options),
        timer_(timer),
        threads_(threads),
        per_candidate_(per_candidate) {}

  Candidate time(const BlockSizes& blocks, const KernelVariant& variant) {
    timer_.use(variant);
    const TilePlan plan = build(blocks);
    const std::vector<std::int64_t> work = tuning::visited_pairs_per_block(plan);
    Candidate c;
    CandidateResult& r = c.result;
    r.blocks = blocks;
    r.variant = variant;
    r.full = plan.stats().full;
    r.partial = plan.stats().partial;
    r.empty = plan.stats().empty;
    r.kept_pairs = plan.stats().kept_pairs;
    c.visited = std::accumulate(work.begin(), work.end(), std::int64_t{0});
    r.boundary_pairs = c.visited - r.kept_pairs;
    r.q_blocks = plan.num_q_blocks();
    calibrate(plan, work);
    sample(plan, work, c);
    if (options_.exhaustive) time_in_full(r, &plan);
    return c;
  }

  // r's full run (verify / exhaustive), once; `plan`: its plan when at hand.
  void time_in_full(CandidateResult& r, const TilePlan* plan = nullptr) {
    if (r.full_seconds) return;
    const auto start = Clock::now();
    timer_.use(r.variant);
    r.full_seconds = plan != nullptr ? timer_.seconds(*plan, options_.repeats)
                                     : timer_.seconds(build(r.blocks), options_.repeats);
    checking_ += Clock::now() - start;
  }

  double fixed() const { return fixed_; }
  double checking_seconds() const { return std::chrono::duration<double>(checking_).count(); }

 private:
  // Rebuilt per candidate rather than kept: plans of small tiles over long
  // sequences hold millions of tiles.
  TilePlan build(const BlockSizes& blocks) const {
    return TilePlan::build(mask_, q_len_, kv_len_, blocks);
  }

  // On the first candidate: the fixed part, and the throughput of a first
  // probe on the smallest sample this candidate allows.
  void calibrate(const TilePlan& plan, const std::vector<std::int64_t>& work) {
    const std::int64_t heads = options_.heads;
    if (fixed_ < 0.0) fixed_ = timer_.seconds(tuning::sampled_plan(plan, {}), kFixedRepeats);
    if (pairs_per_second_ >= 0.0) return;
    const auto probe = tuning::stratified_blocks(work, sample_count(work, 0.0, heads, threads_));
    std::int64_t pairs = 0;
    for (const std::int64_t b : probe) pairs += work[static_cast<std::size_t>(b)];
    const double t = timer_.seconds(tuning::sampled_plan(plan, probe), 1);
    pairs_per_second_ = static_cast<double>(pairs * heads) / tile_seconds(t, fixed_);
  }

  // A sample sized for this candidate's share of the budget, extrapolated to
  // the full run (the full run itself when the sample is the whole plan).
  void sample(const TilePlan& plan, const std::vector<std::int64_t>& work, Candidate& c) {
    CandidateResult& r = c.result;
    const std::int64_t heads = options_.heads;
    const double target = pairs_per_second_ * per_candidate_ / options_.repeats / heads;
    const std::vector<std::int64_t> picked =
        tuning::stratified_blocks(work, sample_count(work, target, heads, threads_));
    std::int64_t sampled = 0;
    for (const std::int64_t b : picked) sampled += work[static_cast<std::size_t>(b)];
    r.sampled_q_blocks = static_cast<std::int64_t>(picked.size());
    r.sample_fraction = c.visited > 0 ? static_cast<double>(sampled) / c.visited : 1.0;
    if (r.sampled_q_blocks == r.q_blocks) {
      r.seconds = timer_.seconds(plan, options_.repeats);
      return;
    }
    const double t = timer_.seconds(tuning::sampled_plan(plan, picked), options_.repeats);
    const double tiles = tile_seconds(t, fixed_);
    r.seconds = fixed_ + tiles / std::max(r.sample_fraction, 1e-12);
    pairs_per_second_ = static_cast<double>(sampled * heads) / tiles;
  }

  const Mask& mask_;
  std::int64_t q_len_, kv_len_;
  const TuneOptions& options_;
  Timer& timer_;
  int threads_;
  double per_candidate_;
  double fixed_ = -1.0;
  double pairs_per_second_ = -1.0;  // visited pairs of all heads per second of tile work
  Clock::duration checking_{};
};

// The index of the candidate `less` puts first (the earliest on a tie).
template <typename Less>
std::size_t first_by(const std::vector<Candidate>& candidates, Less less) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < candidates.size(); ++i) {
    if (less(candidates[i], candidates[best])) best = i;
  }
  return best;
}

bool faster(const Candidate& a, const Candidate& b) { return a.result.seconds < b.result.seconds; }

bool fewer_boundary_pairs(const Candidate& a, const Candidate& b) {
  return a.result.boundary_pairs < b.result.boundary_pairs;
}

// Throughput of every candidate, and the times, into the result.
void finish(TuneResult& result, std::vector<Candidate>& candidates, std::int64_t head_dim,
            const Search& search, Clock::time_point start) {
  const double flops_per_pair =
      4.0 * static_cast<double>(head_dim) * static_cast<double>(result.heads);
  for (Candidate& c : candidates) {
    c.result.gflops =
        flops_per_pair * static_cast<double>(c.result.kept_pairs) / c.result.seconds * 1e-9;
    result.candidates.push_back(c.result);
  }
  result.fixed_seconds = search.fixed();
  result.tuning_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  result.search_seconds = result.tuning_seconds - search.checking_seconds();
}

}  // namespace

TuneResult tune_blocks(const Mask& mask, std::int64_t q_len, std::int64_t kv_len,
                       std::int64_t head_dim, DType dtype, const TuneOptions& options,
                       ThreadingContext* context) {
  const auto start = Clock::now();
  validate(q_len, kv_len, head_dim, options);
  // A runner on the caller's context, which outlives this call: shared
  // without ownership.
  const std::shared_ptr<ThreadingContext> threading(
      std::shared_ptr<void>(), context != nullptr ? context : default_threading_context().get());
  const int threads = threading->resolve(options.threads);
  const std::vector<BlockSizes> list =
      options.candidates.empty() ? tile_candidates_for(q_len, kv_len) : options.candidates;
  const std::vector<KernelVariant> variants =
      options.variants.empty()
          ? std::vector<KernelVariant>(kernel_variants().begin(), kernel_variants().end())
          : options.variants;

  const std::unique_ptr<AttentionBackend> backend = make_backend("cpu", threading);
  TuneResult result;
  result.key =
      make_tune_key(*backend, mask, q_len, kv_len, head_dim, dtype, threads, options.precision);
  result.q_len = q_len;
  result.kv_len = kv_len;
  result.heads = options.heads;

  const std::int64_t heads = options.heads;
  const RandomInputs q(dtype, heads, q_len, head_dim, options.seed * 3 + 1);
  const RandomInputs k(dtype, heads, kv_len, head_dim, options.seed * 3 + 2);
  const RandomInputs v(dtype, heads, kv_len, head_dim, options.seed * 3 + 3);
  std::vector<float> out(static_cast<std::size_t>(heads * q_len * head_dim));
  const AttentionArgs args{
      q.view(), k.view(), v.view(),
      MutableTensorView::contiguous(out.data(), DType::kF32, heads, q_len, head_dim)};
  Timer timer(*backend, args, threads, options.clock, options.precision);
  timer.use(variants.front());

  Search search(mask, q_len, kv_len, options, timer, threads,
                options.budget_seconds / static_cast<double>(list.size() + variants.size() - 1));
  std::vector<Candidate> candidates;
  for (const BlockSizes& blocks : list) candidates.push_back(search.time(blocks, variants.front()));
  const BlockSizes best_blocks = candidates[first_by(candidates, faster)].result.blocks;
  for (std::size_t i = 1; i < variants.size(); ++i) {
    candidates.push_back(search.time(best_blocks, variants[i]));
  }
  result.best = first_by(candidates, faster);
  result.least_boundary = first_by(candidates, fewer_boundary_pairs);
  if (options.verify) {
    for (const std::size_t i : {result.best, result.least_boundary}) {
      search.time_in_full(candidates[i].result);
    }
  }
  finish(result, candidates, head_dim, search, start);
  return result;
}

}  // namespace tilesplash
