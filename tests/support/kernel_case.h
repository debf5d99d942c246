// One case of the kernel sweeps (attention_test.cc, int8_attention_test.cc):
// the mask, the shapes, the tiles, the dtypes and the kernel options of one
// attention call, written as a designated initializer that names only what
// differs from the defaults.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "tilesplash/attention.h"
#include "tilesplash/mask.h"
#include "tilesplash/plan.h"

namespace tilesplash::test {

struct KernelCase {
  std::string name;
  Mask mask = Mask::dense();
  std::int64_t q_len = 128;
  std::int64_t kv_len = 128;
  BlockSizes blocks{64, 64};
  std::int64_t heads = 2;
  std::int64_t d = 64;
  std::int64_t dv = 0;  // 0: same as d
  DType dtype = DType::kF32;
  bool out_in_dtype = false;  // otherwise f32 output
  MaskMode mode = MaskMode::kTile;
  int threads = 1;
  ProductPath path = ProductPath::kAuto;  // bf16 inputs only
  KernelVariant variant = {};
  std::optional<float> scale = std::nullopt;
  bool with_lse = true;

  std::int64_t value_dim() const { return dv ? dv : d; }
  DType out_dtype() const { return out_in_dtype ? dtype : DType::kF32; }
  // The case's kernel options, at `precision`.
  AttentionOptions options(Precision precision = Precision::kDefault) const;
};

// The case's name and every field, for GoogleTest's failure messages.
void PrintTo(const KernelCase& c, std::ostream* os);

}  // namespace tilesplash::test
