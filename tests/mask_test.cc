// Every mask family and OR/AND mixes against brute force: keeps() against the
// definitions, classify() against a scan of every pair, kv_hull() against the
// kept keys, eval_row() against keeps().
#include "tilesplash/mask.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <ostream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "tilesplash/mask_node.h"

namespace tilesplash {
namespace {

using Pred = std::function<bool(std::int64_t, std::int64_t)>;
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t k61 = std::int64_t{1} << 61;
constexpr std::int64_t k62 = std::int64_t{1} << 62;

struct Case {
  std::string name;
  std::function<Mask()> make;  // fresh, structurally equal mask on every call
  Pred reference;              // the definition, written independently
};

Pred causal_ref(std::int64_t offset) {
  return [=](std::int64_t q, std::int64_t k) { return __int128{q} + offset >= k; };
}

Pred local_ref(std::optional<std::int64_t> left, std::optional<std::int64_t> right,
               std::int64_t offset) {
  return [=](std::int64_t q, std::int64_t k) {
    const __int128 centre = __int128{q} + offset;
    return (!left || centre - *left <= k) && (!right || k <= centre + *right);
  };
}

// Chunks by floor division (q // c in Python), so chunks tile negative
// indices too: [-c, -1] is one chunk, not split at zero.
Pred chunked_ref(std::int64_t c) {
  const auto chunk = [c](std::int64_t x) { return x / c - (x % c != 0 && x < 0 ? 1 : 0); };
  return [=](std::int64_t q, std::int64_t k) { return chunk(q) == chunk(k) && q >= k; };
}

Pred or_ref(Pred a, Pred b) {
  return [=](std::int64_t q, std::int64_t k) { return a(q, k) || b(q, k); };
}

Pred and_ref(Pred a, Pred b) {
  return [=](std::int64_t q, std::int64_t k) { return a(q, k) && b(q, k); };
}

// In unsigned arithmetic: defined (wrapping) for indices at the ends of int64.
bool divisible_sum(std::int64_t q, std::int64_t k) {
  return (static_cast<std::uint64_t>(q) * 7 + static_cast<std::uint64_t>(k) * 3) % 5 < 2;
}

const Mask& shared_function_mask() {
  static const Mask mask = Mask::function(divisible_sum, "mod5");
  return mask;
}

std::vector<Case> all_cases() {
  const auto random_ref = [](double d, std::uint64_t s) {
    const Mask m = Mask::random(d, s);
    return Pred([m](std::int64_t q, std::int64_t k) { return m.keeps(q, k); });
  };
  return {
      {"dense", [] { return Mask::dense(); }, [](std::int64_t, std::int64_t) { return true; }},
      {"causal", [] { return Mask::causal(); }, causal_ref(0)},
      {"causal+3", [] { return Mask::causal(3); }, causal_ref(3)},
      {"causal-5", [] { return Mask::causal(-5); }, causal_ref(-5)},
      {"causal_max", [] { return Mask::causal(kMax); }, causal_ref(kMax)},
      {"causal_min", [] { return Mask::causal(kMin); }, causal_ref(kMin)},
      {"local2_3", [] { return Mask::local(2, 3); }, local_ref(2, 3, 0)},
      {"local0_0", [] { return Mask::local(0, 0); }, local_ref(0, 0, 0)},
      {"local5_inf", [] { return Mask::local(5, std::nullopt); }, local_ref(5, std::nullopt, 0)},
      {"local_inf_4", [] { return Mask::local(std::nullopt, 4); }, local_ref(std::nullopt, 4, 0)},
      {"local_inf_inf", [] { return Mask::local(std::nullopt, std::nullopt); },
       local_ref(std::nullopt, std::nullopt, 0)},
      {"local2_1_off-7", [] { return Mask::local(2, 1, -7); }, local_ref(2, 1, -7)},
      {"local1_2_off10", [] { return Mask::local(1, 2, 10); }, local_ref(1, 2, 10)},
      {"local_huge", [] { return Mask::local(kMax, 0, kMax); }, local_ref(kMax, 0, kMax)},
      {"local_huge_neg", [] { return Mask::local(3, 3, kMin); }, local_ref(3, 3, kMin)},
      {"local_max_sides", [] { return Mask::local(kMax, kMax, -4); }, local_ref(kMax, kMax, -4)},
      {"chunked1", [] { return Mask::chunked_causal(1); }, chunked_ref(1)},
      {"chunked4", [] { return Mask::chunked_causal(4); }, chunked_ref(4)},
      {"chunked7", [] { return Mask::chunked_causal(7); }, chunked_ref(7)},
      {"chunked1000", [] { return Mask::chunked_causal(1000); }, chunked_ref(1000)},
      {"chunked_max", [] { return Mask::chunked_causal(kMax); }, chunked_ref(kMax)},
      // Offsets, sides and chunks around 2^61 and 2^62, where bounds used to be
      // clamped: a pair 2^62 apart must still meet an offset of 2^62.
      {"causal_2^62", [] { return Mask::causal(k62); }, causal_ref(k62)},
      {"causal_-2^62", [] { return Mask::causal(-k62); }, causal_ref(-k62)},
      {"causal_2^61+1", [] { return Mask::causal(k61 + 1); }, causal_ref(k61 + 1)},
      {"local_2^62_sides", [] { return Mask::local(k62, k62, 0); }, local_ref(k62, k62, 0)},
      {"local_offset_2^62", [] { return Mask::local(0, 3, k62); }, local_ref(0, 3, k62)},
      {"local_offset_-2^62", [] { return Mask::local(3, 0, -k62 - 1); }, local_ref(3, 0, -k62 - 1)},
      {"local_min_offset_max_right", [] { return Mask::local(std::nullopt, kMax, kMin); },
       local_ref(std::nullopt, kMax, kMin)},
      {"chunked_2^62", [] { return Mask::chunked_causal(k62); }, chunked_ref(k62)},
      {"chunked_2^62+3", [] { return Mask::chunked_causal(k62 + 3); }, chunked_ref(k62 + 3)},
      {"causal_2^62|local", [] { return Mask::causal(k62) | Mask::local(2, 2, -k62); },
       or_ref(causal_ref(k62), local_ref(2, 2, -k62))},
      {"causal_2^62&chunked", [] { return Mask::causal(-k61) & Mask::chunked_causal(k62); },
       and_ref(causal_ref(-k61), chunked_ref(k62))},
      {"random30", [] { return Mask::random(0.3, 1); }, random_ref(0.3, 1)},
      {"random0", [] { return Mask::random(0.0, 2); },
       [](std::int64_t, std::int64_t) { return false; }},
      {"random1", [] { return Mask::random(1.0, 3); },
       [](std::int64_t, std::int64_t) { return true; }},
      {"function", [] { return shared_function_mask(); }, divisible_sum},
      {"causal|local", [] { return Mask::causal(-6) | Mask::local(1, 1, 4); },
       or_ref(causal_ref(-6), local_ref(1, 1, 4))},
      {"causal&local", [] { return Mask::causal(2) & Mask::local(3, 3); },
       and_ref(causal_ref(2), local_ref(3, 3, 0))},
      {"chunked|local", [] { return Mask::chunked_causal(5) | Mask::local(1, 1, 8); },
       or_ref(chunked_ref(5), local_ref(1, 1, 8))},
      {"causal|anticausal", [] { return Mask::causal() | Mask::local(0, std::nullopt); },
       [](std::int64_t, std::int64_t) { return true; }},
      {"disjoint_and", [] { return Mask::causal() & Mask::local(0, std::nullopt, 1); },
       [](std::int64_t, std::int64_t) { return false; }},
      {"random&causal", [] { return Mask::random(0.5, 9) & Mask::causal(); },
       and_ref(random_ref(0.5, 9), causal_ref(0))},
      {"(causal|local)&chunked",
       [] { return (Mask::causal(-3) | Mask::local(0, 0, 5)) & Mask::chunked_causal(9); },
       and_ref(or_ref(causal_ref(-3), local_ref(0, 0, 5)), chunked_ref(9))},
      {"three_way_or",
       [] { return Mask::local(0, 0, -9) | Mask::local(0, 0, 9) | Mask::chunked_causal(3); },
       or_ref(or_ref(local_ref(0, 0, -9), local_ref(0, 0, 9)), chunked_ref(3))},
      {"dense&function", [] { return Mask::dense() & shared_function_mask(); }, divisible_sum},
  };
}

TileKind brute_kind(const Pred& keep, IndexRange rows, IndexRange cols) {
  bool any_kept = false;
  bool any_dropped = false;
  for (std::int64_t q = rows.begin; q < rows.end; ++q) {
    for (std::int64_t k = cols.begin; k < cols.end; ++k)
      (keep(q, k) ? any_kept : any_dropped) = true;
  }
  if (!any_kept) return TileKind::kEmpty;
  return any_dropped ? TileKind::kPartial : TileKind::kFull;
}

// Names the case in failure messages instead of dumping its bytes.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class MaskCaseTest : public ::testing::TestWithParam<Case> {};

TEST_P(MaskCaseTest, KeepsMatchesDefinition) {
  const Case& c = GetParam();
  const Mask mask = c.make();
  for (const std::int64_t base : {std::int64_t{0}, std::int64_t{1} << 40}) {
    for (std::int64_t q = base; q < base + 60; ++q) {
      for (std::int64_t k = base; k < base + 60; ++k) {
        ASSERT_EQ(mask.keeps(q, k), c.reference(q, k)) << c.name << " q=" << q << " k=" << k;
      }
    }
  }
}

TEST_P(MaskCaseTest, ClassifyMatchesScanOnEveryTileOfASmallGrid) {
  const Case& c = GetParam();
  const Mask mask = c.make();
  for (const std::int64_t base : {std::int64_t{0}, std::int64_t{995}}) {
    const std::int64_t n = 13;
    for (std::int64_t q0 = base; q0 < base + n; ++q0) {
      for (std::int64_t q1 = q0 + 1; q1 <= base + n; ++q1) {
        for (std::int64_t k0 = base; k0 < base + n; ++k0) {
          for (std::int64_t k1 = k0 + 1; k1 <= base + n; ++k1) {
            const IndexRange rows{q0, q1};
            const IndexRange cols{k0, k1};
            ASSERT_EQ(mask.classify(rows, cols), brute_kind(c.reference, rows, cols))
                << c.name << " rows [" << q0 << "," << q1 << ") cols [" << k0 << "," << k1 << ")";
          }
        }
      }
    }
  }
}

TEST_P(MaskCaseTest, ClassifyMatchesScanOnRandomTiles) {
  const Case& c = GetParam();
  const Mask mask = c.make();
  std::mt19937_64 rng(42);
  const std::int64_t sizes[] = {1, 2, 7, 16, 63, 64, 65, 128, 129};
  const auto pick_size = [&] {
    return rng() % 2 ? sizes[rng() % std::size(sizes)] : static_cast<std::int64_t>(rng() % 200 + 1);
  };
  for (int trial = 0; trial < 150; ++trial) {
    const std::int64_t q0 = static_cast<std::int64_t>(rng() % 2000);
    // Keep keys near the queries half the time, where the boundaries are.
    const std::int64_t k0 =
        trial % 2 ? static_cast<std::int64_t>(rng() % 2000)
                  : std::max<std::int64_t>(0, q0 + static_cast<std::int64_t>(rng() % 300) - 150);
    const IndexRange rows{q0, q0 + pick_size()};
    const IndexRange cols{k0, k0 + pick_size()};
    ASSERT_EQ(mask.classify(rows, cols), brute_kind(c.reference, rows, cols))
        << c.name << " rows [" << rows.begin << "," << rows.end << ") cols [" << cols.begin << ","
        << cols.end << ")";
    ASSERT_EQ(detail::classify_by_scan(mask.node(), rows, cols), mask.classify(rows, cols));
  }
}

TEST_P(MaskCaseTest, KvHullContainsEveryKeptKey) {
  const Case& c = GetParam();
  const Mask mask = c.make();
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 80; ++trial) {
    const std::int64_t kv_len = static_cast<std::int64_t>(rng() % 300 + 1);
    const std::int64_t q0 = static_cast<std::int64_t>(rng() % 350);
    const IndexRange rows{q0, q0 + static_cast<std::int64_t>(rng() % 40 + 1)};
    const IndexRange hull = mask.kv_hull(rows, kv_len);
    ASSERT_GE(hull.begin, 0);
    ASSERT_LE(hull.end, kv_len);
    for (std::int64_t q = rows.begin; q < rows.end; ++q) {
      for (std::int64_t k = 0; k < kv_len; ++k) {
        if (c.reference(q, k)) {
          ASSERT_TRUE(k >= hull.begin && k < hull.end)
              << c.name << " q=" << q << " k=" << k << " hull [" << hull.begin << "," << hull.end
              << ")";
        }
      }
    }
  }
}

TEST_P(MaskCaseTest, EvalRowMatchesKeeps) {
  const Case& c = GetParam();
  const Mask mask = c.make();
  std::mt19937_64 rng(11);
  const std::int64_t lengths[] = {0, 1, 5, 64, 255, 256, 257, 700};
  std::vector<std::uint8_t> keep(800);
  for (const std::int64_t n : lengths) {
    for (int trial = 0; trial < 20; ++trial) {
      const std::int64_t q = static_cast<std::int64_t>(rng() % 1500);
      const std::int64_t k0 = std::max<std::int64_t>(0, q - static_cast<std::int64_t>(rng() % 800));
      std::fill(keep.begin(), keep.end(), 0xAB);
      mask.eval_row(q, k0, n, keep.data());
      for (std::int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(keep[static_cast<std::size_t>(i)], c.reference(q, k0 + i) ? 1 : 0)
            << c.name << " q=" << q << " k=" << k0 + i;
      }
      ASSERT_EQ(keep[static_cast<std::size_t>(n)], 0xAB) << "eval_row wrote past n";
    }
  }
}

// Indices are any int64 values: near INT64_MIN, around +-2^61 and +-2^62 and
// up to INT64_MAX every answer must still be the definition's (nothing
// clamped, nothing wrapped). Small tiles whose corners sit at those points,
// against every pairing of them.
TEST_P(MaskCaseTest, AnswersExactlyAtTheEndsOfInt64) {
  const Case& c = GetParam();
  const Mask mask = c.make();
  constexpr std::int64_t n = 5;
  const std::int64_t bases[] = {kMin, kMin + 2, -k62 - 3, -k61 - 2, -4,
                                0,    k61 - 2,  k62 - 3,  k62,      kMax - n};
  std::uint8_t keep[n + 1];
  for (const std::int64_t q0 : bases) {
    for (const std::int64_t k0 : bases) {
      for (std::int64_t q = q0; q < q0 + n; ++q) {
        for (std::int64_t k = k0; k < k0 + n; ++k) {
          ASSERT_EQ(mask.keeps(q, k), c.reference(q, k)) << c.name << " q=" << q << " k=" << k;
        }
        keep[n] = 0xAB;
        mask.eval_row(q, k0, n, keep);
        for (std::int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(keep[i], c.reference(q, k0 + i) ? 1 : 0)
              << c.name << " q=" << q << " k=" << k0 + i;
        }
        ASSERT_EQ(keep[n], 0xAB);
      }
      for (std::int64_t rows = 1; rows <= n; ++rows) {
        for (std::int64_t cols = 1; cols <= n; ++cols) {
          const IndexRange r{q0 + n - rows, q0 + n}, k{k0, k0 + cols};
          ASSERT_EQ(mask.classify(r, k), brute_kind(c.reference, r, k))
              << c.name << " rows [" << r.begin << "," << r.end << ") cols [" << k.begin << ","
              << k.end << ")";
        }
      }
      // The hull clips to [0, kv_len): with kv_len = INT64_MAX every kept key
      // >= 0 must lie in it.
      const IndexRange hull = mask.kv_hull({q0, q0 + n}, kMax);
      for (std::int64_t q = q0; q < q0 + n; ++q) {
        for (std::int64_t k = std::max<std::int64_t>(k0, 0); k < k0 + n; ++k) {
          if (c.reference(q, k)) {
            ASSERT_TRUE(k >= hull.begin && k < hull.end) << c.name << " q=" << q << " k=" << k;
          }
        }
      }
    }
  }
}

TEST_P(MaskCaseTest, EvalRowRefusesKeysPastInt64Max) {
  const Mask mask = GetParam().make();
  std::uint8_t keep[4];
  EXPECT_NO_THROW(mask.eval_row(0, kMax - 4, 4, keep));
  EXPECT_THROW(mask.eval_row(0, kMax - 3, 4, keep), std::invalid_argument);
}

TEST_P(MaskCaseTest, EqualConstructionsAreEqualAndHashEqual) {
  const Case& c = GetParam();
  const Mask a = c.make();
  const Mask b = c.make();
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_EQ(std::hash<Mask>{}(a), std::hash<Mask>{}(b));
  EXPECT_EQ(a.to_string(), b.to_string());
}

INSTANTIATE_TEST_SUITE_P(AllMasks, MaskCaseTest, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string name;
                           for (const char ch : info.param.name) {
                             if (ch == '|')
                               name += "_or_";
                             else if (ch == '&')
                               name += "_and_";
                             else
                               name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           }
                           return name;
                         });

TEST(Mask, DistinctCasesCompareUnequal) {
  const std::vector<Case> cases = all_cases();
  for (std::size_t i = 0; i < cases.size(); ++i) {
    for (std::size_t j = 0; j < cases.size(); ++j) {
      if (i == j) continue;
      EXPECT_FALSE(cases[i].make() == cases[j].make()) << cases[i].name << " vs " << cases[j].name;
    }
  }
}

TEST(Mask, StructuralEqualityRules) {
  // Semantically equal but a different family: not equal.
  EXPECT_FALSE(Mask::causal() == Mask::local(std::nullopt, 0));
  EXPECT_FALSE(Mask::local(1, 2) == Mask::local(2, 1));
  EXPECT_FALSE(Mask::local(1, std::nullopt) == Mask::local(1, 1));
  EXPECT_FALSE(Mask::random(0.5, 1) == Mask::random(0.5, 2));
  EXPECT_FALSE(Mask::random(0.5, 1) == Mask::random(0.25, 1));
  // OR / AND compare children in order, and nest flat.
  const Mask a = Mask::causal();
  const Mask b = Mask::local(1, 1);
  const Mask c = Mask::chunked_causal(4);
  EXPECT_FALSE((a | b) == (b | a));
  EXPECT_EQ((a | b) | c, a | (b | c));
  EXPECT_EQ(((a | b) | c).hash(), (a | (b | c)).hash());
  EXPECT_EQ((a & b) & c, a & (b & c));
  EXPECT_FALSE((a | b) == (a & b));
  EXPECT_FALSE((a | b) == (a | b | c));
  // Function masks: copies are equal, separately made ones are not.
  const Mask f = Mask::function(divisible_sum, "f");
  const Mask f_copy = f;
  EXPECT_EQ(f, f_copy);
  EXPECT_EQ(f.hash(), f_copy.hash());
  EXPECT_FALSE(f == Mask::function(divisible_sum, "f"));
  EXPECT_EQ(f.to_string(), "f");
}

TEST(Mask, InvalidArgumentsThrow) {
  EXPECT_THROW(Mask::local(-1, 2), std::invalid_argument);
  EXPECT_THROW(Mask::local(2, -1), std::invalid_argument);
  EXPECT_THROW(Mask::chunked_causal(0), std::invalid_argument);
  EXPECT_THROW(Mask::chunked_causal(-3), std::invalid_argument);
  EXPECT_THROW(Mask::random(1.5, 0), std::invalid_argument);
  EXPECT_THROW(Mask::random(-0.1, 0), std::invalid_argument);
  EXPECT_THROW(Mask::random(std::nan(""), 0), std::invalid_argument);
  EXPECT_THROW(Mask::function(nullptr), std::invalid_argument);
  EXPECT_THROW(Mask(std::shared_ptr<const detail::MaskNode>()), std::invalid_argument);
}

TEST(Mask, TileKindCharacters) {
  EXPECT_EQ(to_char(TileKind::kEmpty), 'E');
  EXPECT_EQ(to_char(TileKind::kPartial), 'P');
  EXPECT_EQ(to_char(TileKind::kFull), 'F');
  EXPECT_EQ(static_cast<int>(TileKind::kEmpty), 0);
  EXPECT_EQ(static_cast<int>(TileKind::kPartial), 1);
  EXPECT_EQ(static_cast<int>(TileKind::kFull), 2);
}

TEST(Mask, AnalyticFamilies) {
  EXPECT_TRUE(Mask::dense().is_analytic());
  EXPECT_TRUE(Mask::causal(2).is_analytic());
  EXPECT_TRUE(Mask::local(1, std::nullopt).is_analytic());
  EXPECT_TRUE(Mask::chunked_causal(3).is_analytic());
  EXPECT_TRUE((Mask::causal() | Mask::local(2, 2)).is_analytic());
  EXPECT_FALSE(Mask::random(0.5, 1).is_analytic());
  EXPECT_FALSE(Mask::function(divisible_sum).is_analytic());
  EXPECT_FALSE((Mask::causal() & Mask::random(0.5, 1)).is_analytic());
}

TEST(Mask, CombinationsResolveAmbiguousTilesExactly) {
  // Two partial children whose union covers the tile, and two whose
  // intersection is empty.
  const Mask both_sides = Mask::causal() | Mask::local(0, std::nullopt);
  EXPECT_EQ(both_sides.classify({0, 8}, {0, 8}), TileKind::kFull);
  const Mask nothing = Mask::causal(-1) & Mask::local(0, std::nullopt);
  EXPECT_EQ(nothing.classify({0, 8}, {0, 8}), TileKind::kEmpty);
  // A full child decides an OR, an empty child decides an AND.
  EXPECT_EQ((Mask::dense() | Mask::random(0.5, 3)).classify({0, 64}, {0, 64}), TileKind::kFull);
  EXPECT_EQ((Mask::causal() & Mask::random(0.5, 3)).classify({0, 4}, {10, 20}), TileKind::kEmpty);
}

TEST(Mask, ChunkedTilesSpanningSeveralChunks) {
  const Mask mask = Mask::chunked_causal(4);
  EXPECT_EQ(mask.classify({4, 8}, {4, 5}), TileKind::kFull);     // column 4 within chunk 1
  EXPECT_EQ(mask.classify({4, 9}, {4, 5}), TileKind::kPartial);  // row 8 is in chunk 2
  EXPECT_EQ(mask.classify({0, 12}, {0, 12}), TileKind::kPartial);
  EXPECT_EQ(mask.classify({8, 12}, {0, 8}), TileKind::kEmpty);   // earlier chunks only
  EXPECT_EQ(mask.classify({2, 4}, {3, 8}), TileKind::kPartial);  // only (3, 3)
  EXPECT_EQ(mask.classify({2, 3}, {3, 8}), TileKind::kEmpty);
}

TEST(Mask, HullsOfBuiltInMasks) {
  EXPECT_EQ(Mask::dense().kv_hull({5, 9}, 100), (IndexRange{0, 100}));
  EXPECT_EQ(Mask::causal().kv_hull({5, 9}, 100), (IndexRange{0, 9}));
  EXPECT_EQ(Mask::causal(3).kv_hull({5, 9}, 10), (IndexRange{0, 10}));
  EXPECT_TRUE(Mask::causal(-20).kv_hull({5, 9}, 100).empty());
  EXPECT_EQ(Mask::local(2, 3).kv_hull({5, 9}, 100), (IndexRange{3, 12}));
  EXPECT_EQ(Mask::local(std::nullopt, 3).kv_hull({5, 9}, 100), (IndexRange{0, 12}));
  EXPECT_EQ(Mask::local(2, std::nullopt).kv_hull({5, 9}, 100), (IndexRange{3, 100}));
  EXPECT_EQ(Mask::chunked_causal(4).kv_hull({5, 9}, 100), (IndexRange{4, 9}));
  EXPECT_EQ(Mask::causal(kMax).kv_hull({0, 1}, 50), (IndexRange{0, 50}));
  // The example: an offset of 2^62 reaches back 2^62 rows exactly.
  EXPECT_TRUE(Mask::causal(k62).keeps(k62, 0));
  EXPECT_TRUE(Mask::causal(k62).keeps(k62 - 1, kMax));
  EXPECT_FALSE(Mask::causal(k62).keeps(k62 - 2, kMax));
  EXPECT_EQ(Mask::causal(k62).classify({k62 - 16, k62}, {0, 16}), TileKind::kFull);
  EXPECT_EQ(Mask::causal(k62).classify({0, 16}, {k62 - 8, k62 + 8}), TileKind::kPartial);
  EXPECT_EQ(Mask::causal(k62).classify({0, 16}, {k62 + 16, k62 + 32}), TileKind::kEmpty);
  EXPECT_TRUE(Mask::causal(kMin).kv_hull({0, 1}, 50).empty());
  EXPECT_EQ((Mask::local(0, 0, -10) | Mask::local(0, 0, 10)).kv_hull({20, 21}, 100),
            (IndexRange{10, 31}));
  EXPECT_EQ((Mask::causal() & Mask::local(2, 2)).kv_hull({20, 22}, 100), (IndexRange{18, 22}));
  EXPECT_TRUE(Mask::dense().kv_hull({3, 3}, 100).empty());
}

TEST(Mask, RandomDensityAndSeeds) {
  const Mask mask = Mask::random(0.25, 7);
  std::int64_t kept = 0;
  std::int64_t differs = 0;
  const Mask other_seed = Mask::random(0.25, 8);
  for (std::int64_t q = 0; q < 300; ++q) {
    for (std::int64_t k = 0; k < 300; ++k) {
      kept += mask.keeps(q, k);
      differs += mask.keeps(q, k) != other_seed.keeps(q, k);
      ASSERT_EQ(mask.keeps(q, k), Mask::random(0.25, 7).keeps(q, k));
    }
  }
  EXPECT_NEAR(static_cast<double>(kept) / 90000.0, 0.25, 0.01);
  EXPECT_GT(differs, 20000);
  EXPECT_EQ(Mask::random(0.0, 1).classify({0, 100}, {0, 100}), TileKind::kEmpty);
  EXPECT_EQ(Mask::random(1.0, 1).classify({0, 100}, {0, 100}), TileKind::kFull);
}

// A node from outside the core families: only keeps, classify and the
// identity methods, relying on MaskNode's default hull and row evaluation.
class DiagonalNode final : public detail::MaskNode {
 public:
  bool keeps(std::int64_t q, std::int64_t k) const override { return q == k; }
  TileKind classify(IndexRange rows, IndexRange cols) const override {
    return detail::classify_by_scan(*this, rows, cols);
  }
  std::string to_string() const override { return "diagonal"; }
  std::size_t hash() const override { return 99; }
  bool equals(const MaskNode&) const override { return true; }
};

TEST(Mask, ExternalNodesUseTheDefaults) {
  const Mask diagonal(std::make_shared<DiagonalNode>());
  EXPECT_EQ(diagonal.kv_hull({3, 5}, 40), (IndexRange{0, 40}));
  std::uint8_t keep[6] = {};
  diagonal.eval_row(2, 0, 6, keep);
  EXPECT_EQ(std::vector<int>(keep, keep + 6), (std::vector<int>{0, 0, 1, 0, 0, 0}));
  EXPECT_EQ(diagonal.classify({0, 1}, {0, 1}), TileKind::kFull);
  EXPECT_EQ(diagonal.classify({0, 2}, {0, 2}), TileKind::kPartial);
  EXPECT_EQ(diagonal.classify({0, 2}, {2, 4}), TileKind::kEmpty);
  EXPECT_EQ(diagonal, Mask(std::make_shared<DiagonalNode>()));
  EXPECT_FALSE(diagonal == Mask::dense());
  EXPECT_EQ((diagonal | Mask::causal(-2)).to_string(), "diagonal|causal:offset=-2");
  // Three partial children that only together cover the tile.
  const Mask everything = diagonal | Mask::causal(-1) | Mask::local(0, std::nullopt, 1);
  EXPECT_EQ(everything.classify({0, 2}, {0, 2}), TileKind::kFull);
  EXPECT_EQ((diagonal | Mask::causal(-1)).classify({0, 2}, {0, 2}), TileKind::kPartial);
}

TEST(Mask, ToStringIsCanonical) {
  EXPECT_EQ(Mask::dense().to_string(), "dense");
  EXPECT_EQ(Mask::causal().to_string(), "causal");
  EXPECT_EQ(Mask::causal(-3).to_string(), "causal:offset=-3");
  EXPECT_EQ(Mask::local(4, 5).to_string(), "local:left=4,right=5");
  EXPECT_EQ(Mask::local(4, 5, 2).to_string(), "local:left=4,right=5,offset=2");
  EXPECT_EQ(Mask::local(std::nullopt, 5).to_string(), "local:right=5");
  EXPECT_EQ(Mask::local(std::nullopt, std::nullopt).to_string(), "local");
  EXPECT_EQ(Mask::chunked_causal(16).to_string(), "chunked:size=16");
  EXPECT_EQ(Mask::random(0.1, 5).to_string(), "random:density=0.1,seed=5");
  EXPECT_EQ((Mask::causal() | (Mask::local(1, 1) & Mask::dense())).to_string(),
            "causal|local:left=1,right=1&dense");
  EXPECT_EQ(((Mask::causal() | Mask::dense()) & Mask::chunked_causal(2)).to_string(),
            "(causal|dense)&chunked:size=2");
}

}  // namespace
}  // namespace tilesplash
