// The int8 path's quantization (Precision::kInt8, SageAttention's recipe), in
// one translation unit compiled without any target's flags and without
// contracted multiply-adds, so that every SIMD target, on every architecture,
// gets bit-identical int8 values and scales, and a scalar reference (the
// tests') can reproduce them exactly:
//  - K is smoothed: its mean over the keys of the call (per head and channel)
//    is subtracted. q . (k - mu) = q . k - q . mu differs from q . k by the
//    same amount for every key of a row, so the softmax is unchanged; the
//    LSE gets scale * q . mu added back.
//  - Each block of kKeyBlock keys (key index / kKeyBlock, from the first key)
//    shares one scale, amax / 127 of its smoothed values; each Q row has its
//    own. A value x becomes nearbyint(x * (127 / amax)) in [-127, 127]
//    (round to nearest, ties to even; NaN and an all-zero block give 0).
//  - The mean: per block of kKeyBlock keys a sum in double in key order, the
//    block sums added in block order, divided by the key count, rounded to
//    float. Blocks can be summed in parallel without changing a bit.
#pragma once

#include <cstdint>

namespace tilesplash::kernel::int8 {

inline constexpr std::int64_t kKeyBlock = 64;
inline constexpr float kLevels = 127.0f;

// sums[c] += row[c] in double: a block's sums start at 0 and take its rows in order.
void add_row(const float* row, std::int64_t d, double* sums);
// mean[c] = float((block_sums[0][c] + block_sums[1][c] + ...) / len), blocks in order.
void finish_mean(const double* block_sums, std::int64_t blocks, std::int64_t d, std::int64_t len,
                 float* mean);
// max over c of |x[c] - mean[c]| (mean null: |x[c]|); NaN if x holds a NaN.
float centred_amax(const float* x, const float* mean, std::int64_t d);

struct Scale {
  float scale = 0.0f;    // amax / 127: the value of one int8 step
  float inverse = 0.0f;  // 127 / amax; 0 when amax is 0 or not finite
};
Scale scale_for(float amax);

// out[c] = nearbyint((x[c] - mean[c]) * inverse) clamped to [-127, 127] (NaN:
// 0); mean null: x[c] * inverse.
void quantize(const float* x, const float* mean, std::int64_t d, float inverse, std::int8_t* out);

// sum over c of double(x[c]) * double(mean[c]) (exact products), in order.
double dot_with_mean(const float* x, const float* mean, std::int64_t d);

}  // namespace tilesplash::kernel::int8
