// What one attention call takes, whatever backend runs it: the tensor views
// (AttentionArgs) and the options (AttentionOptions). The CPU kernel
// (attention.h) and every other backend (backend.h) read these.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "tilesplash/tensor.h"

namespace tilesplash {

enum class MaskMode : std::uint8_t {
  kTile,     // full tiles mask-free, partial tiles bitmasked (the default)
  kElement,  // the mask predicate evaluated on every pair of every visited tile
  kBitmask,  // every visited tile run through the bitmask path
};

std::string_view to_string(MaskMode mode);
std::optional<MaskMode> parse_mask_mode(std::string_view text);

// The precision of the two products.
enum class Precision : std::uint8_t {
  // Q.K^T and P.V in the input dtype (bf16 through the dot product or widened
  // to f32, see ProductPath; f16 widened), accumulated in f32.
  kDefault,
  // Opt-in 8-bit Q.K^T (SageAttention's recipe): K smoothed by subtracting
  // its mean over the keys (which leaves every softmax row unchanged), Q
  // quantized to int8 per token and K per block of 64 keys with f32 scales,
  // the products accumulated exactly in int32 (VNNI where the CPU has it);
  // P.V as in kDefault. Faster on CPUs with VNNI at a small, bounded loss of
  // accuracy (docs/kernel.md: cosine >= 0.999 against f32 on the planted
  // workload and a Wan block). The LSE is that of the unsmoothed scores.
  kInt8,
};
std::string_view to_string(Precision precision);  // "default", "int8"
std::optional<Precision> parse_precision(std::string_view text);

// How the CPU kernel multiplies bf16 inputs where the target has a bf16 dot
// product (vdpbf16ps): through it, or widened to f32 for the FMA units. Which
// is faster depends on the CPU (twice the FMA rate on a Zen 4, half of it on
// a Sapphire Rapids), so kAuto measures both once per CPU model and keeps the
// answer in the tuning cache (choose_product_path(), attention.h).
// TILESPLASH_PRODUCT_PATH=dot|widen in the environment overrides kAuto.
enum class ProductPath : std::uint8_t { kAuto, kDot, kWiden };
std::string_view to_string(ProductPath path);  // "auto", "dot", "widen"
std::optional<ProductPath> parse_product_path(std::string_view text);

// A loop variant of the CPU kernel: alternatives that suit different cores
// (a Zen 4 splits each 512-bit operation over two 256-bit units and has a
// 32 KiB L1; a Sapphire Rapids runs two 512-bit FMAs per cycle from a 48 KiB
// L1 and needs twice the bytes per cycle). The tuner times them as candidates
// (kernel_variants(), tuning.h) and caches the fastest per CPU and shape.
struct KernelVariant {
  // Register tiles of query rows (6 rows each) that go through each key panel
  // (and each slice of V) before the next: 1 streams a tile's K and V from L2
  // once per register tile; 2 or 4 read them from L1 for all but the first.
  int row_groups = 1;
  // Prefetch the next tile's K and V into L2 while the current one runs.
  bool prefetch = false;
  friend bool operator==(const KernelVariant&, const KernelVariant&) = default;
};
inline constexpr int kMaxRowGroups = 4;
// "rows6" (row_groups 1), "rows12", "rows24", with "+prefetch" appended.
std::string to_string(const KernelVariant& variant);
std::optional<KernelVariant> parse_kernel_variant(std::string_view text);

// What the int8 path (Precision::kInt8) did, added to by every call that
// points AttentionOptions::int8_report at it: the (head, q-block, kv tile)
// Q.K^T products it computed, and how many of them ran in f32 because their
// int8 error bound was too large (docs/kernel.md, "8-bit Q.K^T").
struct Int8Report {
  std::int64_t tiles = 0;
  std::int64_t f32_tiles = 0;
};

struct AttentionOptions {
  std::optional<float> scale;  // softmax scale; default 1 / sqrt(head_dim); must be > 0
  MaskMode mask_mode = MaskMode::kTile;
  int threads = 0;  // 0: the runner's context's threads(); < 0 is rejected
  // Reject NaN / Inf in Q, K, V and q.k that overflows f32 (std::invalid_argument
  // naming the first row). false skips both: the caller vouches for its data.
  bool check_finite = true;
  Precision precision = Precision::kDefault;
  // Applies to bf16 inputs only; kDot on a target without a bf16 dot product
  // is rejected (std::invalid_argument).
  ProductPath product_path = ProductPath::kAuto;
  // Loop variant; nullopt: the default (row_groups 1, no prefetch). Callers
  // that pick tiles with choose_blocks() pass its variant too.
  std::optional<KernelVariant> variant = std::nullopt;
  // Precision::kInt8: counts added here (not owned; the caller keeps it alive
  // through the call, and gives each thread its own). Ignored otherwise.
  Int8Report* int8_report = nullptr;
  // Approximate what the plan skips instead of dropping it: every empty key
  // tile of a query tile (the plan's block_q x block_kv tiles) adds n *
  // exp(scale * q . k_mean) * v_mean, its n keys' mean key and value, merged
  // with the exact part through the LSE (docs/masks.md, "Compensation"). A
  // plan that skips nothing gives exactly the uncompensated bits. Costs one
  // pass over rows x skipped tiles, about 1 / block_kv of dense attention.
  bool compensate = false;
};

// Q [heads, q_len, d], K [heads, kv_len, d], V [heads, kv_len, dv]; out
// [heads, q_len, dv] in f32 or the input dtype; lse, when not null, receives
// heads * q_len floats (row-major) of log-sum-exp per row (natural log, of the
// scaled scores). A row with no kept key gives 0 and LSE = -inf.
// d and dv: multiples of 8 up to 256; plan.blocks().block_kv: a multiple of
// 64 up to 1024; block_q: 1 to 4096 (tilesplash/kernel_limits.h).
// Throws std::invalid_argument naming the argument on any mismatch.
struct AttentionArgs {
  TensorView q;
  TensorView k;
  TensorView v;
  MutableTensorView out;
  float* lse = nullptr;
};

}  // namespace tilesplash
