// RowOrder: a row permutation held as both of its tables, so gathering rows
// into run order (source) and scattering results back (position) are each
// one lookup per row.
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tilesplash/candidates.h"

namespace tilesplash {

struct RowOrder::Tables {
  std::vector<std::int64_t> source;
  std::vector<std::int64_t> position;
  std::string name;
};

RowOrder::RowOrder(std::vector<std::int64_t> source, std::string name) {
  const std::int64_t n = static_cast<std::int64_t>(source.size());
  std::vector<std::int64_t> position(source.size(), -1);
  for (std::int64_t r = 0; r < n; ++r) {
    const std::int64_t row = source[static_cast<std::size_t>(r)];
    if (row < 0 || row >= n) {
      throw std::invalid_argument("RowOrder: source[" + std::to_string(r) + "] must be in [0, " +
                                  std::to_string(n) + "), got " + std::to_string(row));
    }
    std::int64_t& slot = position[static_cast<std::size_t>(row)];
    if (slot >= 0) {
      throw std::invalid_argument("RowOrder: row " + std::to_string(row) +
                                  " appears twice (at positions " + std::to_string(slot) + " and " +
                                  std::to_string(r) + "); source must be a permutation");
    }
    slot = r;
  }
  tables_ = std::make_shared<const Tables>(
      Tables{std::move(source), std::move(position), std::move(name)});
}

RowOrder RowOrder::token_major(const VideoGeometry& geometry) {
  geometry.validate();
  std::vector<std::int64_t> source(static_cast<std::size_t>(geometry.tokens()));
  for (std::int64_t r = 0; r < geometry.tokens(); ++r) {
    source[static_cast<std::size_t>(r)] = geometry.to_frame_major(r);
  }
  return RowOrder(std::move(source), std::string(to_string(TokenOrder::kTokenMajor)));
}

std::int64_t RowOrder::size() const {
  return tables_ ? static_cast<std::int64_t>(tables_->source.size()) : 0;
}

std::int64_t RowOrder::source(std::int64_t position) const {
  return tables_ ? tables_->source[static_cast<std::size_t>(position)] : position;
}

std::int64_t RowOrder::position(std::int64_t row) const {
  return tables_ ? tables_->position[static_cast<std::size_t>(row)] : row;
}

std::span<const std::int64_t> RowOrder::sources() const {
  return tables_ ? std::span<const std::int64_t>(tables_->source) : std::span<const std::int64_t>();
}

std::span<const std::int64_t> RowOrder::positions() const {
  return tables_ ? std::span<const std::int64_t>(tables_->position)
                 : std::span<const std::int64_t>();
}

std::string_view RowOrder::name() const {
  if (tables_) return tables_->name;
  return "original";
}

}  // namespace tilesplash
