// What a tuned tile size is valid for. The key is coarse on purpose where a
// neighbouring shape behaves the same (lengths by power of two, density in
// 5% steps, mask parameters dropped) and exact where the answer changes (CPU,
// SIMD target, product path, dtype, head dim, threads), so one tuning run serves a whole
// model's layers and steps.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tilesplash/attention.h"
#include "tilesplash/threading.h"
#include "tilesplash/tuning.h"

namespace tilesplash {
namespace {

// Rows evaluated by estimate_density(); their keys are scanned only inside
// the mask's kv hull, so band masks cost a few memsets per row.
constexpr std::int64_t kDensityRows = 257;
constexpr std::int64_t kEvalChunk = 4096;

// Every run of digits (with an optional fraction) becomes '#': the family of
// `local:left=4096,right=4096` is `local:left=#,right=#`.
std::string normalise_numbers(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    if (std::isdigit(static_cast<unsigned char>(text[i]))) {
      while (i < text.size() &&
             (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) {
        ++i;
      }
      out += '#';
    } else {
      out += text[i++];
    }
  }
  return out;
}

std::int64_t log2_bucket(std::int64_t length) {
  std::int64_t bucket = 0;
  while (length > 1) {
    length >>= 1;
    ++bucket;
  }
  return bucket;
}

void require_at_least_one(std::int64_t value, const char* name) {
  if (value < 1) {
    throw std::invalid_argument(std::string("tuning: ") + name + " must be >= 1, got " +
                                std::to_string(value));
  }
}

}  // namespace

double estimate_density(const Mask& mask, std::int64_t q_len, std::int64_t kv_len) {
  require_at_least_one(q_len, "q_len");
  require_at_least_one(kv_len, "kv_len");
  const std::int64_t rows = std::min(q_len, kDensityRows);
  std::vector<std::uint8_t> keep(static_cast<std::size_t>(std::min(kv_len, kEvalChunk)));
  std::int64_t kept = 0;
  for (std::int64_t i = 0; i < rows; ++i) {
    // Evenly spaced, first and last row included.
    const std::int64_t q = rows == 1 ? 0 : i * (q_len - 1) / (rows - 1);
    const IndexRange hull = mask.kv_hull({q, q + 1}, kv_len);
    for (std::int64_t k0 = hull.begin; k0 < hull.end; k0 += kEvalChunk) {
      const std::int64_t n = std::min(kEvalChunk, hull.end - k0);
      mask.eval_row(q, k0, n, keep.data());
      kept += std::count(keep.begin(), keep.begin() + n, std::uint8_t{1});
    }
  }
  return static_cast<double>(kept) / (static_cast<double>(rows) * static_cast<double>(kv_len));
}

double density_bucket(double density) {
  const double step = density < 0.05 ? 0.01 : 0.05;
  return std::clamp(std::round(density / step) * step, 0.0, 1.0);
}

std::string TuneKey::to_string() const {
  char density_text[16];
  std::snprintf(density_text, sizeof density_text, "%.2f", density);
  return "backend=" + backend + "|cpu=" + cpu + "|isa=" + isa + "|path=" + path +
         "|dtype=" + std::string(tilesplash::to_string(dtype)) + "|d=" + std::to_string(head_dim) +
         "|mask=" + mask_family + "|density=" + density_text + "|len=2^" +
         std::to_string(q_bucket) + "x2^" + std::to_string(kv_bucket) +
         "|threads=" + std::to_string(threads);
}

std::string kernel_path_key(DType dtype, Precision precision) {
  const bool dot = dtype == DType::kBF16 && choose_product_path().path == ProductPath::kDot;
  const std::string products = dot ? "bf16-dot" : "fma";
  return precision == Precision::kInt8 ? "int8+" + products : products;
}

TuneShape make_tune_shape(const Mask& mask, std::int64_t q_len, std::int64_t kv_len) {
  TuneShape shape;
  shape.mask_family = normalise_numbers(mask.to_string());
  shape.density = density_bucket(estimate_density(mask, q_len, kv_len));
  shape.q_bucket = log2_bucket(q_len);
  shape.kv_bucket = log2_bucket(kv_len);
  return shape;
}

TuneKey make_tune_key(const AttentionBackend& backend, const Mask& mask, std::int64_t q_len,
                      std::int64_t kv_len, std::int64_t head_dim, DType dtype, int threads,
                      Precision precision) {
  require_at_least_one(head_dim, "head_dim");
  if (threads < 0) {
    throw std::invalid_argument("tuning: threads must be >= 0 (0: all hardware threads), got " +
                                std::to_string(threads));
  }
  TuneKey key;
  key.backend = std::string(backend.name());
  key.cpu = backend.device_name();
  key.isa = backend.code_path();
  key.path = kernel_path_key(dtype, precision);
  key.dtype = dtype;
  key.head_dim = head_dim;
  TuneShape shape = make_tune_shape(mask, q_len, kv_len);
  key.mask_family = std::move(shape.mask_family);
  key.density = shape.density;
  key.q_bucket = shape.q_bucket;
  key.kv_bucket = shape.kv_bucket;
  key.threads = threads > 0 ? threads : hardware_threads();
  return key;
}

TuneKey make_tune_key(const Mask& mask, std::int64_t q_len, std::int64_t kv_len,
                      std::int64_t head_dim, DType dtype, int threads, Precision precision) {
  // Made once and never run: only its name, device and code path are read
  // (its context starts no worker until a call needs one).
  static const AttentionRunner cpu(default_threading_context());
  return make_tune_key(cpu, mask, q_len, kv_len, head_dim, dtype, threads, precision);
}

}  // namespace tilesplash
