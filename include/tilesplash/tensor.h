// Non-owning views of the [heads, len, dim] tensors the kernel reads and
// writes, with element strides so that PyTorch's [batch, heads, N, d] and
// FlashAttention's [batch, N, heads, d] layouts can be passed without copies,
// and the device whose memory they point into (a backend checks it can read
// it: the CPU kernel reads host memory only; see backend.h).
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace tilesplash {

enum class DType : std::uint8_t { kF32, kBF16, kF16 };

std::string_view to_string(DType dtype);
std::optional<DType> parse_dtype(std::string_view text);  // "f32", "bf16", "f16"
std::int64_t size_of(DType dtype);

// Where a view's memory lives. kCpu is host memory; kCuda a CUDA device's
// (index: its ordinal). The library's own kernel runs on kCpu views only.
enum class DeviceType : std::uint8_t { kCpu, kCuda };

struct Device {
  DeviceType type = DeviceType::kCpu;
  int index = 0;
  friend bool operator==(const Device&, const Device&) = default;
};

std::string to_string(Device device);  // "cpu", "cuda:0"

struct TensorView {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  std::int64_t heads = 0;
  std::int64_t len = 0;
  std::int64_t dim = 0;
  std::int64_t head_stride = 0;  // in elements
  std::int64_t row_stride = 0;   // in elements; elements within a row are contiguous
  Device device{};

  static TensorView contiguous(const void* data, DType dtype, std::int64_t heads, std::int64_t len,
                               std::int64_t dim) {
    return {data, dtype, heads, len, dim, len * dim, dim};
  }
};

struct MutableTensorView {
  void* data = nullptr;
  DType dtype = DType::kF32;
  std::int64_t heads = 0;
  std::int64_t len = 0;
  std::int64_t dim = 0;
  std::int64_t head_stride = 0;
  std::int64_t row_stride = 0;
  Device device{};

  static MutableTensorView contiguous(void* data, DType dtype, std::int64_t heads, std::int64_t len,
                                      std::int64_t dim) {
    return {data, dtype, heads, len, dim, len * dim, dim};
  }
};

// Scalar conversions, round-to-nearest-even, NaN preserved. The bf16 pair is
// inline so that loops over rows (the compensation pass, pooling) vectorise.
inline float bf16_to_float(std::uint16_t bits) {
  const std::uint32_t wide = static_cast<std::uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}
inline std::uint16_t float_to_bf16(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);  // round to nearest, ties to even
  return static_cast<std::uint16_t>(bits >> 16);
}
float f16_to_float(std::uint16_t bits);
std::uint16_t float_to_f16(float value);

}  // namespace tilesplash
