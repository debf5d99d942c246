// The bf16 dot-product paths forced (ProductPath::kDot) on every target that
// has one: vdpbf16ps on avx512bf16, the AMX tiles on amx (natively) and
// amx_emulated (the tile model, tests/emulation/). The sweep of
// attention_test.cc leaves the path to choose_product_path(), which takes
// whichever the CPU runs faster, so there a tile path would run only where
// tiles win. Here each target runs its own path over lengths around the
// tile and panel sizes (1, 63, 64, 65, ragged) x head dims 64, 80, 96, 128,
// 256 (80 and 96 leave a tail of channel pairs after the 32-channel tile
// steps), masks cycling through dense, causal, band and element mode,
// against the float64 reference, and bit-identical on 1 and 3 threads. The
// shapes stay small: the tile model is scalar.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "kernel/isa_dispatch.h"
#include "support/attention_check.h"
#include "support/kernel_case.h"
#include "support/random_data.h"
#include "support/targets.h"
#include "tilesplash/attention.h"
#include "tilesplash/mask.h"
#include "tilesplash/plan.h"

namespace tilesplash::test {
namespace {

using Case = KernelCase;

class DotPathSweep : public TargetCaseTest<Case> {};

std::vector<Case> dot_cases() {
  const std::vector<std::int64_t> lengths = {1, 63, 64, 65, 203};
  const std::vector<std::int64_t> dims = {64, 80, 96, 128, 256};
  std::vector<Case> cases;
  int i = 0;
  for (const std::int64_t n : lengths) {
    for (const std::int64_t d : dims) {
      Case c;
      c.q_len = n;
      c.kv_len = n == 1 ? 1 : n + 11;  // ragged key tiles
      c.d = d;
      c.heads = d == 256 ? 1 : 2;
      c.dtype = DType::kBF16;
      c.path = ProductPath::kDot;
      c.blocks = {std::min<std::int64_t>(n, 48), 64};
      switch (i++ % 4) {
        case 0:
          c.mask = Mask::dense();
          break;
        case 1:
          c.mask = Mask::causal(c.kv_len - c.q_len);
          break;
        case 2:
          c.mask = Mask::local(20, 9);
          break;
        default:
          c.mask = Mask::local(30, 30);
          c.mode = MaskMode::kElement;
          break;
      }
      // snprintf: GCC 12 at -O3 warns (-Wrestrict, falsely) on std::string
      // concatenation here.
      char name[32];
      std::snprintf(name, sizeof name, "n%lld_d%lld", static_cast<long long>(n),
                    static_cast<long long>(d));
      c.name = name;
      cases.push_back(c);
    }
  }
  return cases;
}

TEST_P(DotPathSweep, MatchesTheReferenceOnAnyThreadCount) {
  if (kernel::active_target().bf16_peak.run == nullptr) {
    GTEST_SKIP() << "target " << target() << " has no bf16 dot product (bf16 is widened)";
  }
  const Case& c = test_case();
  HostTensor q(c.dtype, c.heads, c.q_len, c.d);
  HostTensor k(c.dtype, c.heads, c.kv_len, c.d);
  HostTensor v(c.dtype, c.heads, c.kv_len, c.d);
  q.fill_normal(71);
  k.fill_normal(72);
  v.fill_normal(73);
  const std::vector<ReferenceHead> reference = reference_all_heads(c.mask, q, k, v, c.scale);
  const TilePlan plan = TilePlan::build(c.mask, c.q_len, c.kv_len, c.blocks);
  Case one = c;
  one.threads = 1;
  const Outputs first = run_forward(plan, q, k, v, DType::kF32, one.options());
  EXPECT_TRUE(matches_reference(reference, first.out, first.lse.data(),
                                tolerance_for(c.dtype, DType::kF32), v.max_abs()));
  Case three = c;
  three.threads = 3;
  const Outputs again = run_forward(plan, q, k, v, DType::kF32, three.options());
  EXPECT_TRUE(bitwise_equal(first.out, again.out));
  EXPECT_EQ(first.lse, again.lse);
}

TILESPLASH_INSTANTIATE_CASES_FOR_TARGETS(Dot, DotPathSweep, ::testing::ValuesIn(dot_cases()));

// What each target reports its bf16 and int8 products run on: the tile
// instructions exactly on the amx targets, so the sweep above ran them there.
class ProductNames : public TargetTest {};

TEST_P(ProductNames, TheAmxTargetsNameTheirTiles) {
  const bool amx = GetParam() == "amx" || GetParam() == "amx_emulated";
  const KernelProducts int8 = kernel_products(DType::kF32, Precision::kInt8, ProductPath::kWiden);
  EXPECT_EQ(int8.qk == "int8 tdpbusd (AMX)", amx) << int8.qk;
  if (kernel::active_target().bf16_peak.run == nullptr) return;
  const KernelProducts bf16 = kernel_products(DType::kBF16, Precision::kDefault, ProductPath::kDot);
  EXPECT_EQ(bf16.pv, amx ? "bf16 dot product (AMX tdpbf16ps)" : "bf16 dot product (vdpbf16ps)");
}

TILESPLASH_INSTANTIATE_FOR_TARGETS(ProductNames);

// The int8 Q.K^T sums are exact on tiles and on vpdpbusd alike and the rest
// of the int8 path is the same code, so with f32 inputs (P.V on the FMA path
// for both) the tile target's int8 attention equals the VNNI target's bit for
// bit: head dims with and without a tail of channel quads, several threads.
TEST(AmxTiles, Int8AttentionEqualsTheVnniTargets) {
  if (!TILESPLASH_ARCH_X86) GTEST_SKIP() << "x86 only (AMX and AVX-512 targets)";
  const std::vector<std::string> missing =
      kernel::missing_cpu_features("avx512f avx512bw avx512dq avx512vl avx512bf16 avx512vnni");
  if (!missing.empty()) GTEST_SKIP() << "this CPU runs neither amx_emulated nor avx512bf16";
  for (const std::int64_t d : {80, 128}) {
    const std::int64_t n = 190;
    HostTensor q(DType::kF32, 2, n, d), k(DType::kF32, 2, n, d), v(DType::kF32, 2, n, d);
    q.fill_normal(91);
    k.fill_normal(92);
    v.fill_normal(93);
    const TilePlan plan = TilePlan::build(Mask::local(70, 20), n, n, {64, 128});
    AttentionOptions options;
    options.precision = Precision::kInt8;
    options.threads = 2;
    set_isa("avx512bf16");
    const Outputs vnni = run_forward(plan, q, k, v, DType::kF32, options);
    set_isa("amx_emulated");
    const Outputs tiles = run_forward(plan, q, k, v, DType::kF32, options);
    set_isa("");
    EXPECT_TRUE(bitwise_equal(vnni.out, tiles.out)) << "d=" << d;
    EXPECT_EQ(vnni.lse, tiles.lse) << "d=" << d;
  }
}

// On a CPU with AMX: the hardware's tiles against their model, bit for bit.
// The int8 sums are exact, so they must agree; for tdpbf16ps the SDM's
// pseudo-code (two f32 temporaries per dot product, summed, then added) is
// what the model does, and a difference here means the hardware sums in
// another order: the model (tests/emulation/amx_tile_emu.h) is then to be
// corrected.
TEST(AmxTiles, TheHardwareMatchesTheModel) {
  if (!TILESPLASH_ARCH_X86) GTEST_SKIP() << "x86 only (AMX)";
  const std::vector<std::string> missing =
      kernel::missing_cpu_features("amx-tile amx-bf16 amx-int8 avx512bf16");
  if (!missing.empty()) {
    std::string names;
    for (const std::string& feature : missing) names += " " + feature;
    GTEST_SKIP() << "no AMX here to compare with the model (this CPU lacks" << names << ")";
  }
  const std::int64_t n = 150, d = 80;
  for (const Precision precision : {Precision::kDefault, Precision::kInt8}) {
    HostTensor q(DType::kBF16, 2, n, d), k(DType::kBF16, 2, n, d), v(DType::kBF16, 2, n, d);
    q.fill_normal(81);
    k.fill_normal(82);
    v.fill_normal(83);
    const TilePlan plan = TilePlan::build(Mask::causal(), n, n, {64, 64});
    AttentionOptions options;
    options.product_path = ProductPath::kDot;
    options.precision = precision;
    set_isa("amx");
    const Outputs hardware = run_forward(plan, q, k, v, DType::kF32, options);
    set_isa("amx_emulated");
    const Outputs model = run_forward(plan, q, k, v, DType::kF32, options);
    set_isa("");
    EXPECT_TRUE(bitwise_equal(hardware.out, model.out)) << to_string(precision);
    EXPECT_EQ(hardware.lse, model.lse) << to_string(precision);
  }
}

}  // namespace
}  // namespace tilesplash::test
