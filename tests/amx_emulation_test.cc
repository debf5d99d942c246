// The software model of the AMX tile instructions (tests/emulation/
// amx_tile_emu.h), which the amx_emulated test target runs the amx target's
// code on, against the Intel SDM's definitions written out by hand here:
// configuration limits, zeroing, the even/odd f32 sums of tdpbf16ps with
// their rounding and denormal flushing, and tdpbusd's wrapping int32 sums.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "emulation/amx_tile_emu.h"

namespace tilesplash::test {
namespace {

struct alignas(64) Config {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};
};

// Tile 0: rows x n f32 (or int32); 1: rows x k 32-bit pairs; 2: k x n.
Config product_config(int rows, int k, int n) {
  Config c;
  c.rows[0] = static_cast<std::uint8_t>(rows);
  c.colsb[0] = static_cast<std::uint16_t>(4 * n);
  c.rows[1] = static_cast<std::uint8_t>(rows);
  c.colsb[1] = static_cast<std::uint16_t>(4 * k);
  c.rows[2] = static_cast<std::uint8_t>(k);
  c.colsb[2] = static_cast<std::uint16_t>(4 * n);
  return c;
}

std::uint16_t bf16_bits(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, 4);
  return static_cast<std::uint16_t>(bits >> 16);  // exact for the values used here
}

TEST(AmxEmulation, LoadsZeroPastTheConfiguredShapeAndStoresOnlyIt) {
  Config c = product_config(3, 2, 5);
  _tile_loadconfig(&c);
  std::vector<std::uint32_t> src(16 * 16, 0xdeadbeef), out(16 * 16, 7);
  _tile_loadd(0, src.data(), 64);
  _tile_stored(0, out.data(), 64);
  for (int r = 0; r < 16; ++r) {
    for (int col = 0; col < 16; ++col) {
      const bool in = r < 3 && col < 5;
      EXPECT_EQ(out[r * 16 + col], in ? 0xdeadbeefu : 7u) << r << "," << col;
    }
  }
  Config stored;
  _tile_storeconfig(&stored);
  EXPECT_EQ(std::memcmp(&stored, &c, 64), 0);
  _tile_release();
}

TEST(AmxEmulation, Bf16SumsEvenAndOddProductsApartThenAddsThem) {
  // One row, two pairs, one column: products 2^24 then 1 in the even lane,
  // -2^24 then 1 in the odd lane. The SDM's two temporaries: even = 2^24
  // (2^24 + 1 ties to even), odd = -2^24 + 1 (exact), their sum 1, plus the
  // dst's 0.5: 1.5. FMAs in order into the dst (the intrinsics guide's
  // older pseudo-code) would give 0.5 + 2^24 -> 2^24, then 0, 1, 2.
  Config c = product_config(1, 2, 1);
  _tile_loadconfig(&c);
  const std::uint16_t a[4] = {bf16_bits(4096.0f), bf16_bits(4096.0f), bf16_bits(1.0f),
                              bf16_bits(1.0f)};
  const std::uint16_t b[4] = {bf16_bits(4096.0f), bf16_bits(-4096.0f), bf16_bits(1.0f),
                              bf16_bits(1.0f)};
  const float dst = 0.5f;
  _tile_loadd(0, &dst, 4);
  _tile_loadd(1, a, 8);
  _tile_loadd(2, b, 4);
  _tile_dpbf16ps(0, 1, 2);
  float got = -1.0f;
  _tile_stored(0, &got, 4);
  EXPECT_EQ(got, 1.5f);
  _tile_release();
}

TEST(AmxEmulation, Bf16FlushesDenormalInputsAndResults) {
  Config c = product_config(1, 1, 2);
  _tile_loadconfig(&c);
  // Column 0: a denormal bf16 input (2^-127) times 2^100 would be 2^-27 if
  // it were kept; it counts as 0. Column 1: 2^-70 * 2^-70 = 2^-140, a
  // denormal f32 result, flushed to 0 (sign kept).
  const std::uint16_t a[2] = {0x0040, bf16_bits(-std::ldexp(1.0f, -70))};
  const std::uint16_t b[4] = {bf16_bits(std::ldexp(1.0f, 100)), 0, 0,
                              bf16_bits(std::ldexp(1.0f, -70))};
  const float dst[2] = {0.0f, 0.0f};
  _tile_loadd(0, dst, 8);
  _tile_loadd(1, a, 4);
  _tile_loadd(2, b, 8);
  _tile_dpbf16ps(0, 1, 2);
  float got[2] = {1.0f, 1.0f};
  _tile_stored(0, got, 8);
  EXPECT_EQ(got[0], 0.0f);
  EXPECT_EQ(got[1], 0.0f);
  _tile_release();
}

TEST(AmxEmulation, Bf16RoundsTiesToEven) {
  // Products 1 (even) and 0 (odd): the dst 2^24 plus 1 is a tie between 2^24
  // (even significand) and 2^24 + 2, and 2^24 + 2 plus 1 one between 2^24 + 2
  // (odd) and 2^24 + 4: nearest even gives 2^24 and 2^24 + 4.
  Config c = product_config(1, 1, 2);
  _tile_loadconfig(&c);
  const std::uint16_t a[2] = {bf16_bits(1.0f), 0};
  const std::uint16_t b[4] = {bf16_bits(1.0f), 0, bf16_bits(1.0f), 0};
  const float dst[2] = {16777216.0f, 16777218.0f};
  _tile_loadd(0, dst, 8);
  _tile_loadd(1, a, 4);
  _tile_loadd(2, b, 8);
  _tile_dpbf16ps(0, 1, 2);
  float got[2] = {0.0f, 0.0f};
  _tile_stored(0, got, 8);
  EXPECT_EQ(got[0], 16777216.0f);
  EXPECT_EQ(got[1], 16777220.0f);
  _tile_release();
}

TEST(AmxEmulation, Int8SumsWrapInInt32AndMixSignedness) {
  Config c = product_config(1, 1, 1);
  _tile_loadconfig(&c);
  const std::int32_t start = 0x7fffffff;
  const std::uint8_t a[4] = {255, 1, 0, 0};  // unsigned in tdpbusd, -1 and 1 in tdpbssd
  const std::int8_t b[4] = {2, -3, 0, 0};
  _tile_loadd(0, &start, 4);
  _tile_loadd(1, a, 4);
  _tile_loadd(2, b, 4);
  _tile_dpbusd(0, 1, 2);  // 255 * 2 - 3 = 507
  std::int32_t got = 0;
  _tile_stored(0, &got, 4);
  EXPECT_EQ(got, static_cast<std::int32_t>(0x7fffffffu + 507u));
  _tile_zero(0);
  _tile_dpbssd(0, 1, 2);  // -2 - 3 = -5
  _tile_stored(0, &got, 4);
  EXPECT_EQ(got, -5);
  _tile_release();
}

TEST(AmxEmulationDeathTest, FaultsWhereTheHardwareFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Config too_many_rows = product_config(17, 1, 1);
  EXPECT_DEATH(_tile_loadconfig(&too_many_rows), "rows > 16");
  Config wide = product_config(1, 17, 1);
  EXPECT_DEATH(_tile_loadconfig(&wide), "colsb > 64");
  Config palette = product_config(1, 1, 1);
  palette.palette = 2;
  EXPECT_DEATH(_tile_loadconfig(&palette), "palette");
  EXPECT_DEATH(_tile_zero(0), "not configured");
  Config mismatch = product_config(2, 2, 2);
  mismatch.rows[2] = 3;  // src1 has 2 pairs, src2 3 rows
  EXPECT_DEATH(
      {
        _tile_loadconfig(&mismatch);
        _tile_dpbf16ps(0, 1, 2);
      },
      "src1 colsb != 4");
}

}  // namespace
}  // namespace tilesplash::test
