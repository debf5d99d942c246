// The median the commands report of repeated timings: robust to the one run
// another process disturbed.
#pragma once

#include <algorithm>
#include <vector>

namespace tilesplash::cli {

inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

}  // namespace tilesplash::cli
