// The CLI's one name table per enum: each lists the values a command offers,
// in the order users see them, and the names come from the library's
// to_string. Validators, "expected a, b or c" messages, CLI11's IsMember
// lists and the loops over the values (bench --ablation) all read these
// tables, so no enum's names are spelled out again in a command.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "tilesplash/attention_args.h"
#include "tilesplash/tensor_layout.h"
#include "tilesplash/tuning.h"

namespace tilesplash::cli {

inline constexpr std::array kDTypes = {DType::kF32, DType::kBF16, DType::kF16};
inline constexpr std::array kMaskModes = {MaskMode::kTile, MaskMode::kElement, MaskMode::kBitmask};
inline constexpr std::array kPrecisions = {Precision::kDefault, Precision::kInt8};
inline constexpr std::array kProductPaths = {ProductPath::kAuto, ProductPath::kDot,
                                             ProductPath::kWiden};
inline constexpr std::array kLayouts = {Layout::kHND, Layout::kBHND, Layout::kBNHD};

// `tune --clock`: the library has no names for TuneClock, so they are here.
struct ClockName {
  std::string_view name;
  TuneClock clock;
};
inline constexpr std::array kClocks = {ClockName{"wall", TuneClock::kWall},
                                       ClockName{"cpu", TuneClock::kCpu}};
TuneClock parse_clock(std::string_view name);

// The names of `values`, in order.
template <typename Values>
std::vector<std::string> names_of(const Values& values) {
  std::vector<std::string> names;
  for (const auto& value : values) names.emplace_back(to_string(value));
  return names;
}
std::vector<std::string> names_of(const std::array<ClockName, kClocks.size()>& clocks);

// "a, b or c": the names for "expected ..." messages.
std::string or_list(const std::vector<std::string>& names);

}  // namespace tilesplash::cli
