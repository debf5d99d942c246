// The int8 path's quantization (Precision::kInt8), in one translation unit
// compiled without any target's flags and without contracted multiply-adds,
// so that every SIMD target, on every architecture, gets bit-identical int8
// values and scales, and a scalar reference (the tests') can reproduce them
// exactly. Per head, over the call's rows (SageAttention's and SmoothQuant's
// recipes, each exact in real arithmetic):
//  - K is smoothed: its mean mu_k over the keys is subtracted. q . (k - mu_k)
//    differs from q . k by the same q . mu_k for every key of a row, so the
//    softmax is unchanged; the LSE gets scale * q . mu_k added back.
//  - Q is smoothed too: its mean mu_q over the call's rows (SageAttention2
//    takes it per q-block; one per call keeps the correction a bias per key)
//    is subtracted, and mu_q . (k - mu_k), one f32 bias per key (the
//    products of the f32 k - mu_k and mu_q summed in double), is added to
//    every score of that key. A common component of Q (an offset) no longer
//    coarsens its rows.
//  - Range migrates between Q and K per channel: with a = max |q - mu_q| and
//    b = max |k - mu_k| of channel c, Q's channel is multiplied by 1 / m and
//    K's by m, m = 2^round(log2(a / b) / 2) (1 when a or b is 0 or not
//    finite), so both get about sqrt(a * b). A power of two changes no bit of
//    the product; one outlier channel of Q or K no longer coarsens the rest.
//  - Each key and each Q row has its own scale, amax / 127 of its smoothed,
//    migrated values (finer than SageAttention's blocks of keys: on a CPU a
//    scale per key costs nothing in the micro-kernel, and an outlier entry
//    coarsens one key only). A value x becomes nearbyint(x * (127 / amax))
//    in [-127, 127] (round to nearest, ties to even; NaN and an all-zero row
//    give 0).
//  - The means: per block of kKeyBlock rows a sum in double in row order, the
//    block sums added in block order, divided by the row count, rounded to
//    float; a channel's range (a, b above) from each block's minimum and
//    maximum. Blocks can be summed in parallel without changing a bit.
#pragma once

#include <cstdint>

namespace tilesplash::kernel::int8 {

inline constexpr std::int64_t kKeyBlock = 64;  // rows per block of the means' sums
inline constexpr float kLevels = 127.0f;
// The largest migration exponent either way (2^±24 keeps every f32 finite).
inline constexpr int kMaxMigration = 24;

// sums[c] += row[c] in double: a block's sums start at 0 and take its rows in order.
void add_row(const float* row, std::int64_t d, double* sums);
// mean[c] = float((block_sums[0][c] + block_sums[1][c] + ...) / len), blocks in order.
void finish_mean(const double* block_sums, std::int64_t blocks, std::int64_t d, std::int64_t len,
                 float* mean);
// add_row, and lo[c] / hi[c] lowered / raised to row[c] (a NaN wins and stays).
void add_row_range(const float* row, std::int64_t d, double* sums, float* lo, float* hi);
// amax[c] = max over the blocks' ranges of max(hi - mean[c], mean[c] - lo),
// blocks in order: exactly max over the rows of |x[c] - mean[c]|, since f32
// subtraction rounds monotonically and symmetrically (0 for no rows).
void finish_amax(const float* block_lo, const float* block_hi, std::int64_t blocks,
                 const float* mean, std::int64_t d, float* amax);
// The migration factor m of one channel (see above): a power of two.
float migration(float q_amax, float k_amax);

// max over c of |(x[c] - mean[c]) * mul[c]| (mean null: 0; mul null: 1);
// NaN if x holds a NaN.
float centred_amax(const float* x, const float* mean, const float* mul, std::int64_t d);

struct Scale {
  float scale = 0.0f;    // amax / 127: the value of one int8 step
  float inverse = 0.0f;  // 127 / amax; 0 when amax is 0 or not finite
};
Scale scale_for(float amax);

// out[c] = nearbyint((x[c] - mean[c]) * mul[c] * inverse) clamped to
// [-127, 127] (NaN: 0); mean null: 0, mul null: 1.
void quantize(const float* x, const float* mean, const float* mul, std::int64_t d, float inverse,
              std::int8_t* out);

// sum over c of double(x[c]) * double(mean[c]) (exact products), in order.
double dot_with_mean(const float* x, const float* mean, std::int64_t d);
// sum over c of double(x[c] - centre[c]) * double(w[c]), in order: the bias
// mu_q . (k - mu_k) of one key.
double centred_dot(const float* x, const float* centre, const float* w, std::int64_t d);

}  // namespace tilesplash::kernel::int8
