// OR / AND built in one step: any_of and all_of against the pairwise
// operators, the work of building (children stored, counted by the nodes: a
// structural check that catches a quadratic build without timing anything),
// and the nesting limit that keeps every mask's SPEC parseable.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "masks/nodes.h"
#include "tilesplash/mask.h"
#include "tilesplash/mask_spec.h"

namespace tilesplash {
namespace {

// Children stored by the OR / AND nodes that `build` creates.
template <typename Build>
std::uint64_t children_built(Build build) {
  const std::uint64_t before = detail::combine_children_built();
  build();
  return detail::combine_children_built() - before;
}

std::string repeated(const std::string& term, const std::string& op, int n) {
  std::string spec = term;
  for (int i = 1; i < n; ++i) spec += op + term;
  return spec;
}

TEST(MaskCombine, AnyOfAndAllOfEqualThePairwiseOperators) {
  const std::vector<Mask> masks = {Mask::causal(), Mask::local(2, 3), Mask::chunked_causal(4)};
  EXPECT_EQ(Mask::any_of(masks), masks[0] | masks[1] | masks[2]);
  EXPECT_EQ(Mask::all_of(masks), masks[0] & masks[1] & masks[2]);
  // Flattened: an OR among the parts joins the one OR.
  const std::vector<Mask> nested = {masks[0] | masks[1], masks[2]};
  EXPECT_EQ(Mask::any_of(nested), Mask::any_of(masks));
  EXPECT_EQ(Mask::any_of(nested).to_string(), "causal|local:left=2,right=3|chunked:size=4");
  EXPECT_EQ(Mask::any_of(std::vector<Mask>{masks[1]}), masks[1]);
  EXPECT_THROW(Mask::any_of({}), std::invalid_argument);
  EXPECT_THROW(Mask::all_of({}), std::invalid_argument);
  for (std::int64_t q = 0; q < 12; ++q) {
    for (std::int64_t k = 0; k < 12; ++k) {
      EXPECT_EQ(Mask::any_of(masks).keeps(q, k),
                masks[0].keeps(q, k) || masks[1].keeps(q, k) || masks[2].keeps(q, k));
      EXPECT_EQ(Mask::all_of(masks).keeps(q, k),
                masks[0].keeps(q, k) && masks[1].keeps(q, k) && masks[2].keeps(q, k));
    }
  }
}

// Parsing n terms stores O(n) children. Folding them pairwise, as the parser
// once did, stores 2 + 3 + ... + n, about n^2 / 2: 8.4 million for n = 4096.
TEST(MaskCombine, ParsingALongChainStoresEachTermOnce) {
  constexpr int n = 4096;
  for (const char* op : {"|", "&"}) {
    const std::string spec = repeated("causal:offset=1", op, n);
    Mask parsed = Mask::dense();
    EXPECT_EQ(children_built([&] { parsed = parse_mask_spec(spec); }), std::uint64_t{n}) << op;
    EXPECT_EQ(parsed.to_string(), spec);
  }
  // An OR of ANDs, and ORs in brackets that flatten into the outer one.
  const std::string ands = repeated("causal&local:left=1", "|", n / 2);
  EXPECT_EQ(children_built([&] { parse_mask_spec(ands); }), std::uint64_t{n / 2 * 3});
  const std::string brackets = repeated("(causal|dense)", "|", n / 2);
  EXPECT_LE(children_built([&] { parse_mask_spec(brackets); }), std::uint64_t{3 * n});
}

TEST(MaskCombine, AnyOfStoresEachPartOnce) {
  std::vector<Mask> parts;
  for (int i = 0; i < 4096; ++i) parts.push_back(Mask::causal(i));
  EXPECT_EQ(children_built([&] { Mask::any_of(parts); }), parts.size());
  EXPECT_EQ(children_built([&] { Mask::all_of(parts); }), parts.size());
}

// Alternating | and & nests an OR inside an AND at every second step; the SPEC
// prints each such OR in brackets, and the parser reads at most
// kMaxMaskNesting of them, so deeper masks are refused where they are built.
TEST(MaskCombine, NestingIsLimitedSoEveryMaskParsesBack) {
  Mask mask = Mask::causal();
  for (int level = 1; level <= kMaxMaskNesting; ++level) {
    mask = (mask | Mask::causal(level)) & Mask::local(level, level);
  }
  EXPECT_EQ(parse_mask_spec(mask.to_string()), mask);
  try {
    (void)((mask | Mask::dense()) & Mask::causal());
    ADD_FAILURE() << "a mask nested deeper than kMaxMaskNesting was built";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("nest 65 deep, more than 64"), std::string::npos)
        << error.what();
  }
  // Wide is fine: any number of terms at one level.
  std::vector<Mask> wide(10000, Mask::causal());
  EXPECT_EQ(parse_mask_spec(Mask::any_of(wide).to_string()), Mask::any_of(wide));
}

// Terms are counted with repeats (what an evaluation walks): here the parts
// share one node, so the limit is reached without building a million of them.
TEST(MaskCombine, TermsAreLimited) {
  const std::vector<Mask> half(kMaxMaskTerms / 2, Mask::causal());
  const Mask or_half = Mask::any_of(half);
  const Mask both = or_half & Mask::any_of(half);
  EXPECT_EQ(static_cast<const detail::CombineNode&>(both.node()).terms(), kMaxMaskTerms);
  try {
    (void)(both & Mask::dense());
    ADD_FAILURE() << "a mask of more than kMaxMaskTerms terms was built";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("1048577 terms, more than 1048576"), std::string::npos)
        << error.what();
  }
  // The parser counts as it reads: one term too many is refused.
  const std::string spec = repeated("dense", "|", static_cast<int>(kMaxMaskTerms) + 1);
  try {
    parse_mask_spec(spec);
    ADD_FAILURE() << "a SPEC of more than kMaxMaskTerms terms was parsed";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("mask spec: more than 1048576 terms (at position"),
              std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace tilesplash
