// One brute-force audit for a mask against a predicate written from its
// definition: keeps() on every pair (and just outside the sequence),
// classify() on every tile of several ragged grids and on random tiles,
// eval_row() and kv_hull() on every row, and a plan's kinds and kept-pair
// count against the predicate. Small sequences only: it visits N^2 pairs
// per grid.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "family_reference.h"
#include "tilesplash/mask.h"
#include "tilesplash/plan.h"

namespace tilesplash::test {

template <typename Keeps>
void audit_mask(const Mask& mask, std::int64_t n, const Keeps& keeps, const std::string& what,
                std::uint64_t seed = 1) {
  for (std::int64_t q = -1; q <= n; ++q) {
    for (std::int64_t k = -1; k <= n; ++k) {
      ASSERT_EQ(mask.keeps(q, k), keeps(q, k)) << what << " q=" << q << " k=" << k;
    }
  }
  const auto describe = [&](IndexRange rows, IndexRange cols) {
    return what + " rows [" + std::to_string(rows.begin) + "," + std::to_string(rows.end) +
           ") cols [" + std::to_string(cols.begin) + "," + std::to_string(cols.end) + ")";
  };
  for (const auto& [bq, bk] : {std::pair{1, 1}, {3, 5}, {4, 4}, {7, 2}, {16, 8}}) {
    for (std::int64_t q0 = 0; q0 < n + 2; q0 += bq) {
      for (std::int64_t k0 = 0; k0 < n + 2; k0 += bk) {
        const IndexRange rows{q0, std::min(q0 + bq, n + 2)};
        const IndexRange cols{k0, std::min(k0 + bk, n + 2)};
        ASSERT_EQ(mask.classify(rows, cols), brute_kind(keeps, rows, cols)) << describe(rows, cols);
      }
    }
  }
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 60; ++trial) {
    const auto start = [&] { return static_cast<std::int64_t>(rng() % (n + 1)); };
    const auto size = [&] { return static_cast<std::int64_t>(rng() % (n / 2 + 2) + 1); };
    const std::int64_t q0 = start(), k0 = start();
    const IndexRange rows{q0, q0 + size()}, cols{k0, k0 + size()};
    ASSERT_EQ(mask.classify(rows, cols), brute_kind(keeps, rows, cols)) << describe(rows, cols);
  }
  std::vector<std::uint8_t> row(static_cast<std::size_t>(n + 8));
  for (std::int64_t q = 0; q < n; ++q) {
    for (const std::int64_t k0 : {std::int64_t{0}, std::int64_t{3}}) {
      const std::int64_t len = n - k0 + 2;
      mask.eval_row(q, k0, len, row.data());
      for (std::int64_t i = 0; i < len; ++i) {
        ASSERT_EQ(row[static_cast<std::size_t>(i)] != 0, keeps(q, k0 + i))
            << what << " eval_row q=" << q << " k=" << k0 + i;
      }
    }
    const IndexRange hull = mask.kv_hull({q, std::min(n, q + 3)}, n);
    for (std::int64_t r = q; r < std::min(n, q + 3); ++r) {
      for (std::int64_t k = 0; k < n; ++k) {
        if (keeps(r, k)) {
          ASSERT_TRUE(k >= hull.begin && k < hull.end)
              << what << " hull misses q=" << r << " k=" << k;
        }
      }
    }
  }
  std::int64_t kept = 0;
  for (std::int64_t q = 0; q < n; ++q) {
    for (std::int64_t k = 0; k < n; ++k) kept += keeps(q, k) ? 1 : 0;
  }
  for (const auto& [bq, bk] : {std::pair{4, 8}, {5, 3}}) {
    const TilePlan plan = TilePlan::build(mask, n, n, {bq, bk});
    EXPECT_EQ(plan.stats().kept_pairs, kept) << what;
    for (std::int64_t qb = 0; qb < plan.num_q_blocks(); ++qb) {
      for (std::int64_t kb = 0; kb < plan.num_kv_blocks(); ++kb) {
        ASSERT_EQ(plan.kind(qb, kb), brute_kind(keeps, plan.q_range(qb), plan.kv_range(kb)))
            << what << " plan tile " << qb << "," << kb;
      }
    }
  }
}

}  // namespace tilesplash::test
