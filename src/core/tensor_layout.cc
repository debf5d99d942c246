// Layout names and texts, and shapes in messages (tensor_layout.h).
#include "tilesplash/tensor_layout.h"

#include <string>
#include <vector>

namespace tilesplash {

std::string shape_to_string(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

std::string_view to_string(Layout layout) {
  switch (layout) {
    case Layout::kHND:
      return "hnd";
    case Layout::kBHND:
      return "bhnd";
    case Layout::kBNHD:
      return "bnhd";
  }
  return "?";
}

std::string_view layout_axes_text(Layout layout) {
  switch (layout) {
    case Layout::kHND:
      return "[heads, N, d]";
    case Layout::kBHND:
      return "[batch, heads, N, d]";
    case Layout::kBNHD:
      return "[batch, N, heads, d]";
  }
  return "?";
}

std::optional<Layout> parse_layout(std::string_view text) {
  if (text == "hnd") return Layout::kHND;
  if (text == "bhnd") return Layout::kBHND;
  if (text == "bnhd") return Layout::kBNHD;
  return std::nullopt;
}

}  // namespace tilesplash
