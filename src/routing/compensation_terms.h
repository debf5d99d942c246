// What compensation (VideoAttentionOptions::compensate) adds to the router's
// sampled rows, so that an error target scores what will actually run: for
// every head, sampled row and candidate, the skipped tiles of the plan the
// candidate runs (its run order, the front door's tiles, key padding and
// tile granularity applied), pooled as the head's run pools them, summed into
// one softmax state: a normalised output and its LSE. The router merges it
// with each candidate's exact sampled output through the LSEs before taking
// the error. Cost: rows x (key orders x tiles x d + candidates x skipped
// tiles x dv), plus one pooling pass over K and V per distinct key order
// (spatial and temporal).
//
// The terms are computed head by head (fill_head), so that the ladder walk
// pools a head's tiles just before it walks that head: pooling streams the
// head's K and V from memory and the walk finds them in cache (pooled
// for every head before the walk, each head's K and V came from memory once
// more; pooled after it, the walk's own reads waited on memory: 0.25 ms of
// 3.35 at 3,072 tokens).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "compensation/compensation.h"
#include "tilesplash/candidates.h"
#include "tilesplash/plan.h"
#include "tilesplash/tensor.h"
#include "tilesplash/threading.h"

namespace tilesplash::detail {

// How one candidate runs, as far as its compensation term goes.
struct CompensatedRun {
  const TilePlan* plan = nullptr;  // the plan the head would run, in run order
  RowOrder order;                  // Q rows
  RowOrder kv_order;               // K and V rows
  compensation::KeyFilter filter;  // padding and the exactly-attended segment
};

// [heads][rows][candidates] terms; lse -inf (and out 0) where a candidate's
// plan skips nothing for the row. Built empty by compensation_terms(); a
// head's terms exist once fill_head() (or fill()) has run for it.
class CompensationTerms {
 public:
  std::int64_t rows = 0, candidates = 0, dv = 0;
  std::vector<float> out;  // [.., dv]
  std::vector<float> lse;

  std::size_t at(std::int64_t h, std::int64_t j, std::int64_t c) const {
    return static_cast<std::size_t>((h * rows + j) * candidates + c);
  }
  // o (dv values) and lse, row j of head h under candidate c, merged with its
  // term through the LSEs, in double, in place.
  void merge(std::int64_t h, std::int64_t j, std::int64_t c, double* o, double& lse) const;

  // Head h's pooled tiles and terms, on the calling thread; nothing if done
  // already. Heads in any order, each on one thread at a time: every head
  // writes its own slots.
  void fill_head(std::int64_t h);
  // Every head not yet filled, on the call's threads.
  void fill();

  struct Inputs;  // compensation_terms.cc
  std::shared_ptr<Inputs> inputs;
};

CompensationTerms compensation_terms(ThreadingContext& context, int threads, const TensorView& q,
                                     const TensorView& k, const TensorView& v,
                                     std::span<const CompensatedRun> runs,
                                     std::span<const std::int64_t> rows, float scale);

}  // namespace tilesplash::detail
