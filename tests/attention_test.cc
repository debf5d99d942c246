// The kernel against the double-precision reference, every case on every SIMD
// target of the build (skipped where the CPU lacks it). The sweep covers each
// dimension (mask family, lengths around the tile sizes, block sizes that do
// and do not divide them, head dims, dtypes, mask modes, threads) with a mix
// of cases rather than their product, so the suite stays fast enough to also
// run under the sanitizers and an emulator.
#include "tilesplash/attention.h"

#include <gtest/gtest.h>

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "support/attention_check.h"
#include "support/kernel_case.h"
#include "support/random_data.h"
#include "support/targets.h"
#include "tilesplash/mask.h"
#include "tilesplash/plan.h"

namespace tilesplash::test {
namespace {

using Case = KernelCase;

class AttentionSweep : public TargetCaseTest<Case> {};

// The reference of a case, computed once for all its targets: they run one
// after another, so keeping the last case's is enough.
const std::vector<ReferenceHead>& reference_for(const Case& c, const HostTensor& q,
                                                const HostTensor& k, const HostTensor& v) {
  static std::string cached_key;
  static std::vector<ReferenceHead> cached;
  const std::string key = ::testing::PrintToString(c);
  if (key != cached_key) {
    cached_key.clear();
    cached = reference_all_heads(c.mask, q, k, v, c.scale);
    cached_key = key;
  }
  return cached;
}

TEST_P(AttentionSweep, MatchesReference) {
  const Case& c = test_case();
  HostTensor q(c.dtype, c.heads, c.q_len, c.d);
  HostTensor k(c.dtype, c.heads, c.kv_len, c.d);
  HostTensor v(c.dtype, c.heads, c.kv_len, c.value_dim());
  q.fill_normal(11);
  k.fill_normal(22);
  v.fill_normal(33);
  const std::vector<ReferenceHead>& reference = reference_for(c, q, k, v);
  const TilePlan plan = TilePlan::build(c.mask, c.q_len, c.kv_len, c.blocks);
  const Tolerance tol = tolerance_for(c.dtype, c.out_dtype());

  const Outputs o = run_forward(plan, q, k, v, c.out_dtype(), c.options(), c.with_lse);
  EXPECT_TRUE(
      matches_reference(reference, o.out, c.with_lse ? o.lse.data() : nullptr, tol, v.max_abs()));
}

Mask sink_and_band() {
  return Mask::function([](std::int64_t, std::int64_t k) { return k < 16; }, "sink16") |
         Mask::local(16, 16);
}

Mask hashed_pattern() {
  return Mask::function([](std::int64_t q, std::int64_t k) { return (q * 7 + k * 3) % 11 < 3; },
                        "hashed");
}

// Every row keeps the first 64 keys; beyond them only odd groups of 6 rows
// keep keys, in one 64-key stripe of every 192. So in a bitmasked tile some
// register tiles of rows keep nothing, others only panels in the middle of it.
Mask striped_row_groups() {
  return Mask::function(
      [](std::int64_t q, std::int64_t k) {
        return k < 64 || ((q / 6) % 2 == 1 && (k / 64) % 3 == 1);
      },
      "striped_row_groups");
}

using enum DType;
using enum MaskMode;

// Mask families and their combinations, at mixed shapes / dtypes / modes.
// Functions, not globals: the masks are built only once the library is initialised.
std::vector<Case> mask_cases() {
  return {
      {.name = "dense_129", .q_len = 129, .kv_len = 129},
      {.name = "causal_1000_bf16",
       .mask = Mask::causal(),
       .q_len = 1000,
       .kv_len = 1000,
       .blocks = {128, 128},
       .dtype = kBF16,
       .threads = 2},
      {.name = "causal_offset_plus_decode_129x1000",
       .mask = Mask::causal(871),
       .q_len = 129,
       .kv_len = 1000,
       .blocks = {64, 192},
       .d = 80,
       .dtype = kF16},
      {.name = "causal_offset_plus37_127x129",
       .mask = Mask::causal(37),
       .q_len = 127,
       .kv_len = 129},
      {.name = "causal_offset_minus5_1000",
       .mask = Mask::causal(-5),
       .q_len = 1000,
       .kv_len = 1000,
       .blocks = {100, 128},
       .threads = 2},
      {.name = "causal_bottom_right_1000x129",
       .mask = Mask::causal(129 - 1000),
       .q_len = 1000,
       .kv_len = 129,
       .blocks = {64, 128},
       .dtype = kBF16},
      {.name = "local_both_1000_bf16_out_bf16",
       .mask = Mask::local(50, 30),
       .q_len = 1000,
       .kv_len = 1000,
       .d = 128,
       .dtype = kBF16,
       .out_in_dtype = true,
       .threads = 2},
      {.name = "local_left_only_1000",
       .mask = Mask::local(100, std::nullopt),
       .q_len = 1000,
       .kv_len = 1000,
       .blocks = {128, 128},
       .mode = kElement},
      {.name = "local_right_only_1000_f16",
       .mask = Mask::local(std::nullopt, 40),
       .q_len = 1000,
       .kv_len = 1000,
       .blocks = {16, 64},
       .dtype = kF16,
       .mode = kBitmask},
      {.name = "local_offset_minus300",
       .mask = Mask::local(20, 20, -300),
       .q_len = 1000,
       .kv_len = 1000,
       .blocks = {128, 64},
       .threads = 2},
      {.name = "local_offset_plus500_129x1000",
       .mask = Mask::local(64, 64, 500),
       .q_len = 129,
       .kv_len = 1000,
       .blocks = {64, 128},
       .dtype = kBF16},
      {.name = "chunked_100_1000_bf16",
       .mask = Mask::chunked_causal(100),
       .q_len = 1000,
       .kv_len = 1000,
       .blocks = {128, 192},
       .dtype = kBF16},
      {.name = "chunked_7_129",
       .mask = Mask::chunked_causal(7),
       .q_len = 129,
       .kv_len = 129,
       .blocks = {16, 64},
       .mode = kBitmask},
      {.name = "random_030_127x129", .mask = Mask::random(0.3, 7), .q_len = 127, .kv_len = 129},
      {.name = "random_005_1000_bf16",
       .mask = Mask::random(0.05, 8),
       .q_len = 1000,
       .kv_len = 1000,
       .blocks = {128, 128},
       .dtype = kBF16,
       .threads = 2},
      {.name = "function_hashed_300x500", .mask = hashed_pattern(), .q_len = 300, .kv_len = 500},
      {.name = "function_hashed_element",
       .mask = hashed_pattern(),
       .q_len = 300,
       .kv_len = 500,
       .dtype = kBF16,
       .mode = kElement},
      {.name = "or_sink_band_f16",
       .mask = sink_and_band(),
       .q_len = 1000,
       .kv_len = 1000,
       .dtype = kF16,
       .threads = 2},
      {.name = "or_band_chunked_bf16",
       .mask = Mask::local(32, 32) | Mask::chunked_causal(256),
       .q_len = 1000,
       .kv_len = 1000,
       .blocks = {128, 128},
       .dtype = kBF16},
      {.name = "and_sliding_window",
       .mask = Mask::causal() & Mask::local(128, std::nullopt),
       .q_len = 1000,
       .kv_len = 1000,
       .blocks = {128, 128},
       .mode = kElement},
      {.name = "and_random_causal_bf16",
       .mask = Mask::random(0.5, 3) & Mask::causal(),
       .q_len = 129,
       .kv_len = 129,
       .dtype = kBF16,
       .mode = kBitmask},
      {.name = "and_of_or",
       .mask = (Mask::causal() | Mask::random(0.1, 5)) & Mask::local(200, 200),
       .q_len = 1000,
       .kv_len = 1000,
       .blocks = {100, 192},
       .heads = 3,
       .threads = 2},
  };
}
TILESPLASH_INSTANTIATE_CASES_FOR_TARGETS(Masks, AttentionSweep, ::testing::ValuesIn(mask_cases()));

// The three mask modes must agree on masks with full, partial and empty tiles.
std::vector<Case> mode_cases() {
  return {
      {.name = "striped_tile",
       .mask = striped_row_groups(),
       .q_len = 300,
       .kv_len = 1000,
       .blocks = {48, 256},
       .threads = 2},
      {.name = "striped_bitmask_bf16",
       .mask = striped_row_groups(),
       .q_len = 300,
       .kv_len = 1000,
       .blocks = {96, 256},
       .d = 128,
       .dtype = kBF16,
       .mode = kBitmask},
      {.name = "striped_element_f16",
       .mask = striped_row_groups(),
       .q_len = 300,
       .kv_len = 1000,
       .blocks = {48, 192},
       .dtype = kF16,
       .mode = kElement},
      {.name = "causal_tile", .mask = Mask::causal(), .q_len = 1000, .kv_len = 1000, .threads = 2},
      {.name = "causal_element",
       .mask = Mask::causal(),
       .q_len = 1000,
       .kv_len = 1000,
       .mode = kElement,
       .threads = 2},
      {.name = "causal_bitmask",
       .mask = Mask::causal(),
       .q_len = 1000,
       .kv_len = 1000,
       .mode = kBitmask,
       .threads = 2},
      {.name = "local_bf16_element",
       .mask = Mask::local(50, 30),
       .q_len = 1000,
       .kv_len = 1000,
       .blocks = {128, 128},
       .dtype = kBF16,
       .mode = kElement},
      {.name = "local_bf16_bitmask",
       .mask = Mask::local(50, 30),
       .q_len = 1000,
       .kv_len = 1000,
       .blocks = {128, 128},
       .dtype = kBF16,
       .mode = kBitmask},
      {.name = "chunked_f16_element",
       .mask = Mask::chunked_causal(100),
       .q_len = 500,
       .kv_len = 500,
       .dtype = kF16,
       .mode = kElement},
      {.name = "random_f16_bitmask",
       .mask = Mask::random(0.2, 9),
       .q_len = 300,
       .kv_len = 300,
       .dtype = kF16,
       .out_in_dtype = true,
       .mode = kBitmask},
  };
}
TILESPLASH_INSTANTIATE_CASES_FOR_TARGETS(Modes, AttentionSweep, ::testing::ValuesIn(mode_cases()));

// Lengths at, just below and just above the tile sizes; blocks that divide
// them and blocks that leave ragged edges; long sequences with one head.
std::vector<Case> shape_cases() {
  return {
      {.name = "len1", .q_len = 1, .kv_len = 1, .blocks = {128, 128}},
      {.name = "decode_1x1000_bf16",
       .mask = Mask::causal(999),
       .q_len = 1,
       .kv_len = 1000,
       .blocks = {16, 128},
       .dtype = kBF16},
      {.name = "len7_causal", .mask = Mask::causal(), .q_len = 7, .kv_len = 7, .blocks = {16, 64}},
      {.name = "q1000_kv7", .q_len = 1000, .kv_len = 7, .blocks = {100, 64}, .dtype = kF16},
      {.name = "q7_kv1000_block_q1", .q_len = 7, .kv_len = 1000, .blocks = {1, 64}},
      {.name = "len127_causal", .mask = Mask::causal(), .q_len = 127, .kv_len = 127},
      {.name = "len128_causal",
       .mask = Mask::causal(),
       .q_len = 128,
       .kv_len = 128,
       .blocks = {128, 128},
       .dtype = kBF16},
      {.name = "len129_causal",
       .mask = Mask::causal(),
       .q_len = 129,
       .kv_len = 129,
       .blocks = {128, 128}},
      {.name = "len128_block_kv_192", .q_len = 128, .kv_len = 128, .blocks = {128, 192}},
      {.name = "q129_kv1000_local",
       .mask = Mask::local(300, 300),
       .q_len = 129,
       .kv_len = 1000,
       .blocks = {100, 192},
       .dtype = kBF16,
       .out_in_dtype = true},
      {.name = "len4099_causal",
       .mask = Mask::causal(),
       .q_len = 4099,
       .kv_len = 4099,
       .blocks = {128, 128},
       .heads = 1,
       .threads = 2},
      {.name = "len4099_local_bf16",
       .mask = Mask::local(256, 0),
       .q_len = 4099,
       .kv_len = 4099,
       .blocks = {256, 192},
       .heads = 1,
       .dtype = kBF16,
       .threads = 2},
      {.name = "q7_kv4099_bf16",
       .q_len = 7,
       .kv_len = 4099,
       .blocks = {64, 128},
       .heads = 1,
       .dtype = kBF16},
      {.name = "q4099_kv1_f16",
       .q_len = 4099,
       .kv_len = 1,
       .blocks = {128, 64},
       .heads = 1,
       .dtype = kF16},
      {.name = "q4099_kv129_chunked",
       .mask = Mask::chunked_causal(100),
       .q_len = 4099,
       .kv_len = 129,
       .blocks = {64, 64},
       .heads = 1},
  };
}
TILESPLASH_INSTANTIATE_CASES_FOR_TARGETS(Shapes, AttentionSweep,
                                         ::testing::ValuesIn(shape_cases()));

// Head dims (fast paths 64 / 128, odd 80, the extremes 8 and 256, dv != d,
// dv not a multiple of any target's column chunk), row counts that leave a
// partial register tile of rows, output dtypes, custom scales and a call
// without LSE.
std::vector<Case> dim_cases() {
  return {
      {.name = "d40_dv24_dense_ragged",
       .q_len = 203,
       .kv_len = 517,
       .blocks = {50, 256},
       .d = 40,
       .dv = 24,
       .threads = 2},
      {.name = "d248_dv8_causal_block_q7",
       .mask = Mask::causal(256),
       .q_len = 77,
       .kv_len = 333,
       .blocks = {7, 128},
       .heads = 1,
       .d = 248,
       .dv = 8},
      {.name = "d96_bf16_block_q5_local",
       .mask = Mask::local(30, 70),
       .q_len = 130,
       .kv_len = 300,
       .blocks = {5, 64},
       .d = 96,
       .dtype = kBF16},
      {.name = "d136_f16_dv56_element",
       .mask = Mask::local(100, 5),
       .q_len = 211,
       .kv_len = 389,
       .blocks = {64, 192},
       .d = 136,
       .dv = 56,
       .dtype = kF16,
       .mode = kElement},
      {.name = "d80_causal", .mask = Mask::causal(), .q_len = 300, .kv_len = 300, .d = 80},
      {.name = "d128_bf16", .q_len = 200, .kv_len = 260, .d = 128, .dtype = kBF16},
      {.name = "d128_f16_out_f16",
       .mask = Mask::causal(),
       .q_len = 200,
       .kv_len = 260,
       .d = 128,
       .dtype = kF16,
       .out_in_dtype = true,
       .threads = 2},
      {.name = "d64_dv128",
       .mask = Mask::local(40, 10),
       .q_len = 300,
       .kv_len = 300,
       .d = 64,
       .dv = 128},
      {.name = "d128_dv80_bf16_out_bf16",
       .mask = Mask::causal(),
       .q_len = 300,
       .kv_len = 300,
       .d = 128,
       .dv = 80,
       .dtype = kBF16,
       .out_in_dtype = true},
      {.name = "d8_bf16",
       .mask = Mask::causal(),
       .q_len = 129,
       .kv_len = 129,
       .d = 8,
       .dtype = kBF16},
      {.name = "d256", .mask = Mask::causal(), .q_len = 129, .kv_len = 129, .heads = 1, .d = 256},
      {.name = "scale_03", .mask = Mask::causal(), .q_len = 300, .kv_len = 300, .scale = 0.3f},
      {.name = "scale_005_bf16",
       .q_len = 300,
       .kv_len = 300,
       .d = 128,
       .dtype = kBF16,
       .scale = 0.05f},
      {.name = "scale_1_f16_d16",
       .mask = Mask::causal(),
       .q_len = 300,
       .kv_len = 300,
       .d = 16,
       .dtype = kF16,
       .scale = 1.0f},
      {.name = "no_lse",
       .mask = Mask::causal(),
       .q_len = 300,
       .kv_len = 300,
       .dtype = kBF16,
       .with_lse = false},
  };
}
TILESPLASH_INSTANTIATE_CASES_FOR_TARGETS(Dims, AttentionSweep, ::testing::ValuesIn(dim_cases()));

}  // namespace
}  // namespace tilesplash::test
