// The mask SPEC language: every family, precedence, whitespace, round trips
// through Mask::to_string, and error messages that name the offending part.
#include "tilesplash/mask_spec.h"

#include <gtest/gtest.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tilesplash/mask.h"

namespace tilesplash {
namespace {

TEST(MaskSpec, ParsesEveryFamily) {
  EXPECT_EQ(parse_mask_spec("dense"), Mask::dense());
  EXPECT_EQ(parse_mask_spec("causal"), Mask::causal());
  EXPECT_EQ(parse_mask_spec("causal:offset=5"), Mask::causal(5));
  EXPECT_EQ(parse_mask_spec("causal:offset=-12"), Mask::causal(-12));
  EXPECT_EQ(parse_mask_spec("local:left=3,right=4"), Mask::local(3, 4));
  EXPECT_EQ(parse_mask_spec("local:right=4,left=3"), Mask::local(3, 4));
  EXPECT_EQ(parse_mask_spec("local:left=3,right=4,offset=-2"), Mask::local(3, 4, -2));
  EXPECT_EQ(parse_mask_spec("local:left=3"), Mask::local(3, std::nullopt));
  EXPECT_EQ(parse_mask_spec("local:right=0"), Mask::local(std::nullopt, 0));
  EXPECT_EQ(parse_mask_spec("local:offset=7"), Mask::local(std::nullopt, std::nullopt, 7));
  EXPECT_EQ(parse_mask_spec("local"), Mask::local(std::nullopt, std::nullopt));
  EXPECT_EQ(parse_mask_spec("chunked:size=64"), Mask::chunked_causal(64));
  EXPECT_EQ(parse_mask_spec("random:density=0.25,seed=9"), Mask::random(0.25, 9));
  EXPECT_EQ(parse_mask_spec("random:density=1e-3"), Mask::random(0.001, 0));
  EXPECT_EQ(parse_mask_spec("random:density=1,seed=18446744073709551615"),
            Mask::random(1.0, 18446744073709551615ULL));
  EXPECT_EQ(parse_mask_spec("causal:offset=9223372036854775807"),
            Mask::causal(9223372036854775807LL));
}

TEST(MaskSpec, AndBindsTighterThanOr) {
  const Mask a = Mask::causal();
  const Mask b = Mask::local(1, 1);
  const Mask c = Mask::chunked_causal(4);
  EXPECT_EQ(parse_mask_spec("causal|local:left=1,right=1&chunked:size=4"), a | (b & c));
  EXPECT_EQ(parse_mask_spec("causal&local:left=1,right=1|chunked:size=4"), (a & b) | c);
  EXPECT_EQ(parse_mask_spec("causal|local:left=1,right=1|chunked:size=4"), a | b | c);
  EXPECT_EQ(parse_mask_spec("(causal|local:left=1,right=1)&chunked:size=4"), (a | b) & c);
  EXPECT_EQ(parse_mask_spec("((causal))"), a);
  EXPECT_EQ(parse_mask_spec("causal|(local:left=1,right=1|chunked:size=4)"), a | b | c);
}

TEST(MaskSpec, ToleratesWhitespace) {
  EXPECT_EQ(parse_mask_spec("  local : left = 3 , right=4\t| causal \n"),
            Mask::local(3, 4) | Mask::causal());
  EXPECT_EQ(parse_mask_spec("( dense & causal:offset= -1 )"), Mask::dense() & Mask::causal(-1));
}

TEST(MaskSpec, CanonicalTextRoundTrips) {
  const std::vector<std::string> canonical = {
      "dense",
      "causal",
      "causal:offset=-3",
      "local",
      "local:left=4",
      "local:right=5,offset=1",
      "local:left=0,right=0,offset=-9223372036854775808",
      "chunked:size=1",
      "random:density=0.1,seed=5",
      "random:density=0.3333333333333333,seed=0",
      "random:density=1e-07,seed=12",
      "causal|local:left=1,right=1&dense",
      "(causal|dense)&chunked:size=2&(local:left=1|random:density=0.5,seed=1)",
      "dense&causal|local:left=2,right=2&chunked:size=8|random:density=0,seed=3",
  };
  for (const std::string& text : canonical) {
    const Mask mask = parse_mask_spec(text);
    EXPECT_EQ(mask.to_string(), text);
    EXPECT_EQ(parse_mask_spec(mask.to_string()), mask) << text;
  }
}

TEST(MaskSpec, BuiltMasksRoundTrip) {
  const std::vector<Mask> masks = {
      Mask::random(1.0 / 7.0, 123456789),
      Mask::local(std::nullopt, std::nullopt, 5),
      ((Mask::causal(2) | Mask::local(3, std::nullopt)) & Mask::chunked_causal(5)) | Mask::dense(),
      (Mask::causal() | Mask::dense()) & (Mask::local(1, 1) | Mask::chunked_causal(3)),
  };
  for (const Mask& mask : masks) {
    const Mask parsed = parse_mask_spec(mask.to_string());
    EXPECT_EQ(parsed, mask) << mask.to_string();
    EXPECT_EQ(parsed.hash(), mask.hash()) << mask.to_string();
  }
}

struct ErrorCase {
  std::string spec;
  std::string message;  // expected substring
};

TEST(MaskSpec, RejectsMalformedSpecsNamingThePart) {
  const std::vector<ErrorCase> cases = {
      {"", "empty specification"},
      {"   ", "empty specification"},
      {"foo", "unknown mask 'foo' (expected dense, causal, local, chunked, random, keys, spatial"},
      {"Causal", "unknown mask 'Causal'"},
      {"foo:x=1", "unknown mask 'foo'"},
      {"local:left=x", "local: 'left' must be an integer >= 0, got 'x'"},
      {"local:left=-1", "local: 'left' must be an integer >= 0, got '-1'"},
      {"local:right=2.5", "local: 'right' must be an integer >= 0, got '2.5'"},
      {"local:left=", "local: 'left' must be an integer >= 0, got ''"},
      {"local:left=1,left=2", "local: duplicate key 'left'"},
      {"local:foo=1", "local: unknown key 'foo' (expected left, right or offset)"},
      {"local:left", "local: expected '=' after 'left'"},
      {"local:left=1,", "local: expected key=value"},
      {"local:left=1,,right=2", "local: expected key=value"},
      {"causal:", "causal: expected key=value"},
      {"causal:offset=1.5", "causal: 'offset' must be an integer, got '1.5'"},
      {"causal:offset=99999999999999999999", "causal: 'offset' must be an integer"},
      {"causal:size=3", "causal: unknown key 'size' (expected offset)"},
      {"dense:x=1", "dense: unknown key 'x' (expected no parameters)"},
      {"chunked", "chunked: missing 'size'"},
      {"chunked:size=0", "chunked: 'size' must be an integer >= 1, got '0'"},
      {"random:seed=1", "random: missing 'density'"},
      {"random:density=1.5", "random: 'density' must be a number in [0, 1], got '1.5'"},
      {"random:density=-0.5", "random: 'density' must be a number in [0, 1], got '-0.5'"},
      {"random:density=nan", "random: 'density' must be a number in [0, 1], got 'nan'"},
      {"random:density=0.5,seed=-1", "random: 'seed' must be an integer in [0, 2^64), got '-1'"},
      {"random:density=0.5,seed=1,seed=2", "random: duplicate key 'seed'"},
      {"causal|", "empty term at position 7"},
      {"|causal", "empty term at position 0"},
      {"causal||dense", "empty term at position 7"},
      {"causal&&dense", "empty term at position 7"},
      {"causal&|dense", "empty term"},
      {"()", "empty term at position 1"},
      {"causal)", "unexpected ')' at position 6"},
      {"(causal", "unbalanced '(' at position 0"},
      {"causal dense", "unexpected 'd' at position 7"},
      {"causal#", "unexpected '#'"},
      {std::string(100, '(') + "dense" + std::string(100, ')'), "nested deeper than 64"},
  };
  for (const ErrorCase& c : cases) {
    try {
      parse_mask_spec(c.spec);
      ADD_FAILURE() << "accepted '" << c.spec << "'";
    } catch (const std::invalid_argument& error) {
      const std::string what = error.what();
      EXPECT_EQ(what.rfind("mask spec: ", 0), 0u) << what;
      EXPECT_NE(what.find(c.message), std::string::npos)
          << "spec '" << c.spec << "' gave: " << what << "\nexpected: " << c.message;
    }
  }
}

}  // namespace
}  // namespace tilesplash
