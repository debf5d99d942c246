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

struct AttentionOptions {
  std::optional<float> scale;  // softmax scale; default 1 / sqrt(head_dim); must be > 0
  MaskMode mask_mode = MaskMode::kTile;
  int threads = 0;  // 0: the runner's context's threads(); < 0 is rejected
  // Reject NaN / Inf in Q, K, V and q.k that overflows f32 (std::invalid_argument
  // naming the first row). false skips both: the caller vouches for its data.
  bool check_finite = true;
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
