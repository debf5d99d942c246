#include "tilesplash/tensor.h"

#include <cmath>
#include <cstring>

namespace tilesplash {

std::string_view to_string(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "f16";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view text) {
  if (text == "f32" || text == "float32") return DType::kF32;
  if (text == "bf16" || text == "bfloat16") return DType::kBF16;
  if (text == "f16" || text == "float16") return DType::kF16;
  return std::nullopt;
}

std::int64_t size_of(DType dtype) { return dtype == DType::kF32 ? 4 : 2; }

std::string to_string(Device device) {
  switch (device.type) {
    case DeviceType::kCpu:
      return "cpu";
    case DeviceType::kCuda:
      return "cuda:" + std::to_string(device.index);
  }
  return "?";
}

float f16_to_float(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1fu;
  const std::uint32_t mantissa = bits & 0x3ffu;
  std::uint32_t out;
  if (exponent == 0x1f) {
    out = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    out = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    out = sign;
  } else {
    // Subnormal half: value = mantissa * 2^-24, exact in float.
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    std::memcpy(&out, &magnitude, sizeof out);
    out |= sign;
  }
  float value;
  std::memcpy(&value, &out, sizeof value);
  return value;
}

std::uint16_t float_to_f16(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);   // NaN
  if (abs_bits >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflow
  float magnitude;
  std::memcpy(&magnitude, &abs_bits, sizeof magnitude);
  if (magnitude < 6.103515625e-05f) {
    // Subnormal (or zero): round magnitude / 2^-24 to an integer, ties to even.
    const float scaled = std::nearbyint(magnitude * 16777216.0f);
    return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(scaled));
  }
  // Normal: drop 13 mantissa bits with round-to-nearest-even, then rebias.
  std::uint32_t rounded = abs_bits + 0xfffu + ((abs_bits >> 13) & 1u);
  rounded = (rounded >> 13) - (112u << 10);
  return static_cast<std::uint16_t>(sign | rounded);
}

}  // namespace tilesplash
