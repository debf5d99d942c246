// The amx target's products on AMX tiles: Q.K^T and P.V for bf16 inputs
// (tdpbf16ps) and the int8 path's Q.K^T (tdpbusd), inside the flash step of
// kernel/flash_forward-inl.h. The softmax between the products, the f32
// inputs and everything else run the AVX-512 code of the templates. Included
// after kernel/bf16_dot_path-inl.h by kernel_amx.cc and, with the tile
// instructions modelled in software, by the test-only twin
// tests/emulation/kernel_amx_emulated.cc.
//
// The packed layouts are the dot-product paths' unchanged, because they are
// already AMX's: a row of a B tile is one channel pair (bf16 K panel, [d/2]
// [kPanel]), one key pair (V, [keys/2][dvp]) or one channel quad (int8 K
// panel, [d/4][kPanel]) for 16 columns, and A is rows of Q or of the bf16
// probabilities. One call covers the micro-kernel's R <= 16 rows and 64
// columns: four accumulator tiles of R rows x 16 f32 (or int32) columns,
// the reduction in steps of 16 pairs (quads); a head dim that leaves fewer
// takes tiles 6 and 7, configured for that tail.
//
// Tiles: 0-3 accumulators, 4 A, 5 B, 6 A of the tail, 7 B of the tail.
// The configuration is loaded per call and released after it, so no tile
// state outlives a call (another library on the same thread may use tiles).
// The bf16 path takes row groups of 16 rows (AmxBf16Path::kTileRows), every
// row of a tile, where the vector paths' register tile of kRows = 6 would
// use 6 and load each B tile for 6 rows; the int8 path keeps kRows, since
// its tiles may fall back to the f32 register tile. Untuned otherwise: one B
// tile is reloaded for every product, and the configuration per call;
// docs/kernel.md lists what is to be measured on a CPU with AMX.

static_assert(kPanel == 64 && kRows <= 16, "the tile micro-kernels are written for 4 x 16 columns");

// GCC's tile loads are asm statements that do not say they read memory: this
// keeps the compiler from moving the stores before it past them.
inline void tile_memory_barrier() { __asm__ __volatile__("" ::: "memory"); }

// LDTILECFG's 64-byte operand, palette 1.
struct alignas(64) TileConfig {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

// `rows` rows of A and the accumulators; `tail`: 32-bit elements (pairs or
// quads) of the reduction left after its whole steps of 16, 0 for none.
inline void load_tile_config(int rows, int tail) {
  TileConfig config;
  for (int t = 0; t < 5; ++t) {
    config.rows[t] = static_cast<std::uint8_t>(rows);
    config.colsb[t] = 64;
  }
  config.rows[5] = 16;
  config.colsb[5] = 64;
  if (tail > 0) {
    config.rows[6] = static_cast<std::uint8_t>(rows);
    config.colsb[6] = static_cast<std::uint16_t>(4 * tail);
    config.rows[7] = static_cast<std::uint8_t>(tail);
    config.colsb[7] = 64;
  }
  // GCC 12's ldtilecfg asm names only the first 8 bytes as its input: without
  // the barrier the other stores to `config` could be dropped as dead.
  tile_memory_barrier();
  _tile_loadconfig(&config);
}

struct AmxTiles {
  static constexpr const char* kInt8Name = "tdpbusd (AMX)";

  // acc[r][0, 64) (int32) = Q8[r] . K8 panel over `quads` channel quads, Q's
  // bytes unsigned and K's signed, as vpdpbusd (the int8 path's layouts).
  template <int R>
  static void int8_sums(const std::uint32_t* q, std::int64_t q_stride, std::int64_t quads,
                        const std::uint32_t* panel, std::int32_t* acc) {
    const std::int64_t whole = quads / 16 * 16;
    load_tile_config(R, static_cast<int>(quads - whole));
    tile_memory_barrier();
    const long qb = q_stride * 4, kb = kPanel * 4;
    for (std::int64_t c = 0; c < whole; c += 16) {
      _tile_loadd(4, q + c, qb);
      _tile_loadd(5, panel + c * kPanel, kb);
      _tile_dpbusd(0, 4, 5);
      _tile_loadd(5, panel + c * kPanel + 16, kb);
      _tile_dpbusd(1, 4, 5);
      _tile_loadd(5, panel + c * kPanel + 32, kb);
      _tile_dpbusd(2, 4, 5);
      _tile_loadd(5, panel + c * kPanel + 48, kb);
      _tile_dpbusd(3, 4, 5);
    }
    if (whole < quads) {
      _tile_loadd(6, q + whole, qb);
      _tile_loadd(7, panel + whole * kPanel, kb);
      _tile_dpbusd(0, 6, 7);
      _tile_loadd(7, panel + whole * kPanel + 16, kb);
      _tile_dpbusd(1, 6, 7);
      _tile_loadd(7, panel + whole * kPanel + 32, kb);
      _tile_dpbusd(2, 6, 7);
      _tile_loadd(7, panel + whole * kPanel + 48, kb);
      _tile_dpbusd(3, 6, 7);
    }
    store_accumulators(acc, kPanel);
  }

  static void store_accumulators(void* acc, std::int64_t stride) {
    auto* out = static_cast<std::uint32_t*>(acc);
    _tile_stored(0, out, stride * 4);
    _tile_stored(1, out + 16, stride * 4);
    _tile_stored(2, out + 32, stride * 4);
    _tile_stored(3, out + 48, stride * 4);
    _tile_release();
  }
};

// Bf16DotPath with both micro-kernels on tiles.
struct AmxBf16Path : Bf16DotPath {
  static constexpr const char* kName = "AMX tdpbf16ps";
  // Rows per call (kernel/flash_forward-inl.h's row groups): a whole tile.
  static constexpr int kTileRows = 16;

  template <int R>
  static void qk(const std::uint32_t* __restrict q, std::int64_t q_stride, std::int64_t d,
                 const std::uint32_t* __restrict panel, float* __restrict s, std::int64_t s_stride,
                 VF* __restrict row_max) {
    const std::int64_t pairs = d / 2;
    const std::int64_t whole = pairs / 16 * 16;
    load_tile_config(R, static_cast<int>(pairs - whole));
    tile_memory_barrier();
    const long qb = q_stride * 4, kb = kPanel * 4;
    for (std::int64_t c = 0; c < whole; c += 16) {
      _tile_loadd(4, q + c, qb);
      _tile_loadd(5, panel + c * kPanel, kb);
      _tile_dpbf16ps(0, 4, 5);
      _tile_loadd(5, panel + c * kPanel + 16, kb);
      _tile_dpbf16ps(1, 4, 5);
      _tile_loadd(5, panel + c * kPanel + 32, kb);
      _tile_dpbf16ps(2, 4, 5);
      _tile_loadd(5, panel + c * kPanel + 48, kb);
      _tile_dpbf16ps(3, 4, 5);
    }
    if (whole < pairs) {
      _tile_loadd(6, q + whole, qb);
      _tile_loadd(7, panel + whole * kPanel, kb);
      _tile_dpbf16ps(0, 6, 7);
      _tile_loadd(7, panel + whole * kPanel + 16, kb);
      _tile_dpbf16ps(1, 6, 7);
      _tile_loadd(7, panel + whole * kPanel + 32, kb);
      _tile_dpbf16ps(2, 6, 7);
      _tile_loadd(7, panel + whole * kPanel + 48, kb);
      _tile_dpbf16ps(3, 6, 7);
    }
    AmxTiles::store_accumulators(s, s_stride);
    // The row max from the stored scores, while they are in L1.
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) row_max[r] = vmax(load(s + r * s_stride + j * 16), row_max[r]);
    }
  }

  // `keys` is whole panels (flash_forward-inl.h), so whole steps of 16 pairs.
  template <int R>
  static void pv(const std::uint32_t* __restrict pairs, std::int64_t p_stride, std::int64_t keys,
                 const std::uint32_t* __restrict v, std::int64_t v_stride, float* __restrict acc,
                 std::int64_t acc_stride, const float* alpha) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        float* a = acc + r * acc_stride + j * 16;
        store(a, load(a) * alpha[r]);
      }
    }
    load_tile_config(R, 0);
    tile_memory_barrier();
    const long ab = acc_stride * 4, pb = p_stride * 4, vb = v_stride * 4;
    _tile_loadd(0, acc, ab);
    _tile_loadd(1, acc + 16, ab);
    _tile_loadd(2, acc + 32, ab);
    _tile_loadd(3, acc + 48, ab);
    for (std::int64_t pair = 0; pair < keys / 2; pair += 16) {
      const std::uint32_t* vp = v + pair * v_stride;
      _tile_loadd(4, pairs + pair, pb);
      _tile_loadd(5, vp, vb);
      _tile_dpbf16ps(0, 4, 5);
      _tile_loadd(5, vp + 16, vb);
      _tile_dpbf16ps(1, 4, 5);
      _tile_loadd(5, vp + 32, vb);
      _tile_dpbf16ps(2, 4, 5);
      _tile_loadd(5, vp + 48, vb);
      _tile_dpbf16ps(3, 4, 5);
    }
    AmxTiles::store_accumulators(acc, acc_stride);
  }
};

namespace {

// The tile peak: four independent tdpbf16ps chains on full 16 x 16 tiles,
// 16 rows x 16 columns x 32 bf16 multiply-adds (2 flops) each. The operands
// are 2^-12, so every product is a normal f32 and the sums stay small.
float amx_bf16_peak_run(std::int64_t rounds) {
  alignas(64) std::uint16_t operand[16 * 32];
  alignas(64) float out[4][16 * 16];
  std::fill(std::begin(operand), std::end(operand), std::uint16_t{0x3980});  // 2^-12
  load_tile_config(16, 0);
  tile_memory_barrier();
  _tile_loadd(4, operand, 64);
  _tile_loadd(5, operand, 64);
  for (std::int64_t r = 0; r < rounds; ++r) {
    _tile_dpbf16ps(0, 4, 5);
    _tile_dpbf16ps(1, 4, 5);
    _tile_dpbf16ps(2, 4, 5);
    _tile_dpbf16ps(3, 4, 5);
  }
  _tile_stored(0, out[0], 64);
  _tile_stored(1, out[1], 64);
  _tile_stored(2, out[2], 64);
  _tile_stored(3, out[3], 64);
  const float total = out[0][0] + out[1][0] + out[2][0] + out[3][0];
  _tile_release();
  return total;
}

// The int8 tile peak: four tdpbusd chains on full tiles, 16 x 16 int32
// elements x 64 byte products (2 operations) each. A zero operand keeps the
// sums constant.
float amx_int8_peak_run(std::int64_t rounds) {
  alignas(64) std::uint8_t a[16 * 64], b[16 * 64];
  alignas(64) std::int32_t out[4][16 * 16];
  std::fill(std::begin(a), std::end(a), std::uint8_t{1});
  std::fill(std::begin(b), std::end(b), std::uint8_t{0});
  load_tile_config(16, 0);
  tile_memory_barrier();
  _tile_loadd(4, a, 64);
  _tile_loadd(5, b, 64);
  for (std::int64_t r = 0; r < rounds; ++r) {
    _tile_dpbusd(0, 4, 5);
    _tile_dpbusd(1, 4, 5);
    _tile_dpbusd(2, 4, 5);
    _tile_dpbusd(3, 4, 5);
  }
  _tile_stored(0, out[0], 64);
  _tile_stored(1, out[1], 64);
  _tile_stored(2, out[2], 64);
  _tile_stored(3, out[3], 64);
  _tile_release();
  return static_cast<float>(out[0][0] + out[1][0] + out[2][0] + out[3][0]);
}

}  // namespace

// The target's operations: the tile paths for bf16 (when choose_product_path()
// picks the dot product: the tile peak against the FMA peak) and for the
// int8 Q.K^T of every input dtype, and the tile peak loops, so that the bench
// reports efficiency against the unit that ran.
inline TargetOps amx_target_ops() {
  TargetOps ops =
      target_ops_with<AmxBf16Path, AmxTiles>({&amx_bf16_peak_run, 4.0 * 16 * 16 * 32 * 2});
  ops.int8_peak = {&amx_int8_peak_run, 4.0 * 16 * 16 * 64 * 2};
  return ops;
}
