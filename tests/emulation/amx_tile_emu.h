// Test-only: a software model of the AMX tile instructions the amx target
// uses (kernel/amx_path-inl.h), so that its code runs and is checked against
// the float64 reference on any CPU (tests/emulation/kernel_amx_emulated.cc,
// the `amx_emulated` test target; docs/kernel.md). Included before the kernel
// templates: it takes GCC's _tile_* macros and functions away and puts these
// in their place, so a tile instruction this model lacks does not compile
// rather than running natively.
//
// Written from the Intel SDM's pseudo-code (vol. 2, TILELOADD, TDPBF16PS,
// TDPBUSD, ...): palette 1 (8 tiles of at most 16 rows of 64 bytes); rows past
// a tile's configured rows and bytes past its colsb are zero after any write;
// TDPBF16PS sums the even and the odd bf16 products of a row into two f32
// temporaries starting at zero, each step an FMA rounded to nearest even
// with denormal inputs and results flushed to zero (DAZ, FTZ; MXCSR is not
// read), then adds their sum to the destination (also DAZ, FTZ); the int8 dot
// products sum four byte products into each int32 element, wrapping. What the
// hardware raises (#GP for a bad configuration, #UD for a tile used
// unconfigured or with shapes that do not fit) aborts here, naming the fault.
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tilesplash_emulation::amx {
// Internal linkage: the units that include this are compiled with different
// -m flags (the twin with AVX-512's), and one shared copy of an inline
// function could carry instructions another unit's CPU lacks.
namespace {

inline constexpr int kTiles = 8;
inline constexpr int kMaxRows = 16;
inline constexpr int kMaxColsb = 64;

struct TileState {
  int palette = 0;  // 0: tiles not configured (init state)
  std::uint8_t rows[kTiles] = {};
  std::uint16_t colsb[kTiles] = {};
  alignas(64) std::uint8_t data[kTiles][kMaxRows][kMaxColsb] = {};
};

// Tile state is per thread, as the hardware's is.
inline thread_local TileState g_state;

[[noreturn]] inline void fault(const char* what, const char* detail) {
  std::fprintf(stderr, "emulated AMX: %s: %s\n", what, detail);
  std::abort();
}

inline TileState& configured(int tile, const char* instruction) {
  TileState& st = g_state;
  if (st.palette == 0) fault(instruction, "#UD: tiles not configured (no ldtilecfg)");
  if (tile < 0 || tile >= kTiles || st.rows[tile] == 0) fault(instruction, "#UD: tile unused");
  return st;
}

// LDTILECFG: the 64-byte configuration, checked as the hardware does (#GP).
inline void loadconfig(const void* config) {
  std::uint8_t raw[64];
  std::memcpy(raw, config, 64);
  TileState& st = g_state;
  if (raw[0] == 0) {  // palette 0: back to the init state
    st = TileState{};
    return;
  }
  if (raw[0] != 1) fault("ldtilecfg", "#GP: palette other than 0 or 1");
  for (int i = 1; i < 16; ++i) {
    if (raw[i] != 0) fault("ldtilecfg", "#GP: start_row or reserved bytes not zero");
  }
  TileState next;
  next.palette = 1;
  for (int t = 0; t < 16; ++t) {
    std::uint16_t colsb;
    std::memcpy(&colsb, raw + 16 + 2 * t, 2);
    const std::uint8_t rows = raw[48 + t];
    if (t >= kTiles) {
      if (colsb != 0 || rows != 0) fault("ldtilecfg", "#GP: tile past palette 1's eight");
      continue;
    }
    if (rows > kMaxRows || colsb > kMaxColsb) fault("ldtilecfg", "#GP: rows > 16 or colsb > 64");
    if ((rows == 0) != (colsb == 0)) fault("ldtilecfg", "#GP: rows and colsb not both zero");
    next.rows[t] = rows;
    next.colsb[t] = colsb;
  }
  st = next;  // every tile zeroed
}

inline void storeconfig(void* config) {
  std::uint8_t raw[64] = {};
  const TileState& st = g_state;
  raw[0] = static_cast<std::uint8_t>(st.palette);
  for (int t = 0; t < kTiles; ++t) {
    std::memcpy(raw + 16 + 2 * t, &st.colsb[t], 2);
    raw[48 + t] = st.rows[t];
  }
  std::memcpy(config, raw, 64);
}

inline void release() { g_state = TileState{}; }

inline void zero(int tile) {
  TileState& st = configured(tile, "tilezero");
  std::memset(st.data[tile], 0, sizeof st.data[tile]);
}

inline void loadd(int tile, const void* base, long stride) {
  TileState& st = configured(tile, "tileloadd");
  std::memset(st.data[tile], 0, sizeof st.data[tile]);
  const auto* src = static_cast<const std::uint8_t*>(base);
  for (int r = 0; r < st.rows[tile]; ++r) {
    std::memcpy(st.data[tile][r], src + r * stride, st.colsb[tile]);
  }
}

inline void stored(int tile, void* base, long stride) {
  TileState& st = configured(tile, "tilestored");
  auto* dst = static_cast<std::uint8_t*>(base);
  for (int r = 0; r < st.rows[tile]; ++r) {
    std::memcpy(dst + r * stride, st.data[tile][r], st.colsb[tile]);
  }
}

// The shape checks the tile products share (#UD).
inline TileState& product_shapes(int dst, int a, int b, const char* instruction) {
  TileState& st = configured(dst, instruction);
  configured(a, instruction);
  configured(b, instruction);
  if (dst == a || dst == b || a == b) fault(instruction, "#UD: the three tiles must differ");
  if (st.colsb[dst] % 4 != 0 || st.colsb[a] % 4 != 0) fault(instruction, "#UD: colsb % 4");
  if (st.rows[a] != st.rows[dst]) fault(instruction, "#UD: src1 rows != dst rows");
  if (st.colsb[b] != st.colsb[dst]) fault(instruction, "#UD: src2 colsb != dst colsb");
  if (st.colsb[a] != 4 * st.rows[b]) fault(instruction, "#UD: src1 colsb != 4 * src2 rows");
  return st;
}

// Denormal to signed zero (DAZ on inputs, FTZ on results).
inline float flush(float x) {
  return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x;
}

inline float bf16_value(const std::uint8_t* p) {
  std::uint16_t h;
  std::memcpy(&h, p, 2);
  const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return flush(f);
}

inline void dpbf16ps(int dst, int a, int b) {
  TileState& st = product_shapes(dst, a, b, "tdpbf16ps");
  const int n_cols = st.colsb[dst] / 4, pairs = st.colsb[a] / 4;
  for (int m = 0; m < st.rows[dst]; ++m) {
    float* c = reinterpret_cast<float*>(st.data[dst][m]);
    for (int n = 0; n < n_cols; ++n) {
      float even = 0.0f, odd = 0.0f;
      for (int k = 0; k < pairs; ++k) {
        const std::uint8_t* x = st.data[a][m] + 4 * k;
        const std::uint8_t* y = st.data[b][k] + 4 * n;
        even = flush(std::fma(bf16_value(x), bf16_value(y), even));
        odd = flush(std::fma(bf16_value(x + 2), bf16_value(y + 2), odd));
      }
      c[n] = flush(flush(c[n]) + flush(even + odd));
    }
  }
}

// TDPB[SU][SU]D: four byte products per int32 element, summed with wrap-around.
template <bool ASigned, bool BSigned>
inline void dpb_d(int dst, int a, int b, const char* instruction) {
  TileState& st = product_shapes(dst, a, b, instruction);
  const int n_cols = st.colsb[dst] / 4, quads = st.colsb[a] / 4;
  const auto byte = [](std::uint8_t v, bool is_signed) -> std::int32_t {
    return is_signed ? static_cast<std::int8_t>(v) : v;
  };
  for (int m = 0; m < st.rows[dst]; ++m) {
    for (int n = 0; n < n_cols; ++n) {
      std::uint32_t sum;
      std::memcpy(&sum, st.data[dst][m] + 4 * n, 4);
      for (int k = 0; k < quads; ++k) {
        for (int i = 0; i < 4; ++i) {
          const std::int32_t product =
              byte(st.data[a][m][4 * k + i], ASigned) * byte(st.data[b][k][4 * n + i], BSigned);
          sum += static_cast<std::uint32_t>(product);
        }
      }
      std::memcpy(st.data[dst][m] + 4 * n, &sum, 4);
    }
  }
}

}  // namespace
}  // namespace tilesplash_emulation::amx

// GCC's intrinsics out, the model in. Those not modelled are left undefined.
#undef _tile_loadd
#undef _tile_stream_loadd
#undef _tile_stored
#undef _tile_zero
#undef _tile_dpbf16ps
#undef _tile_dpbssd
#undef _tile_dpbsud
#undef _tile_dpbusd
#undef _tile_dpbuud
#define _tile_loadconfig(config) tilesplash_emulation::amx::loadconfig(config)
#define _tile_storeconfig(config) tilesplash_emulation::amx::storeconfig(config)
#define _tile_release() tilesplash_emulation::amx::release()
#define _tile_zero(dst) tilesplash_emulation::amx::zero(dst)
#define _tile_loadd(dst, base, stride) tilesplash_emulation::amx::loadd(dst, base, stride)
#define _tile_stored(src, base, stride) tilesplash_emulation::amx::stored(src, base, stride)
#define _tile_dpbf16ps(dst, a, b) tilesplash_emulation::amx::dpbf16ps(dst, a, b)
#define _tile_dpbssd(dst, a, b) tilesplash_emulation::amx::dpb_d<true, true>(dst, a, b, "tdpbssd")
#define _tile_dpbusd(dst, a, b) tilesplash_emulation::amx::dpb_d<false, true>(dst, a, b, "tdpbusd")
#define TILESPLASH_AMX_EMULATED 1
