// A plan's rows as intervals of kept keys; see tilesplash/row_intervals.h.
#include "tilesplash/row_intervals.h"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>

namespace tilesplash {
namespace {

// A q-block's visited keys in kv order: a run of full tiles [begin, end), or
// one partial tile starting at `begin` with its bitmask.
struct Segment {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  const std::uint64_t* bits = nullptr;  // null for a full run
};

std::vector<Segment> segments_of(const TilePlan& plan, std::int64_t q_block) {
  std::vector<Segment> segments;
  for (const PlanTile& tile : plan.tiles(q_block)) {
    const IndexRange keys = plan.kv_range(tile.kv_block);
    if (tile.is_full()) {
      if (!segments.empty() && segments.back().bits == nullptr &&
          segments.back().end == keys.begin) {
        segments.back().end = keys.end;
      } else {
        segments.push_back({keys.begin, keys.end, nullptr});
      }
    } else {
      segments.push_back({keys.begin, keys.end, plan.partial_bits(tile.partial_id)});
    }
  }
  return segments;
}

// Collects one row's intervals, merging touching ones; false once more than
// `limit` are needed.
class RowBuilder {
 public:
  explicit RowBuilder(std::int64_t limit) : limit_(limit) {}
  void clear() { starts_.clear(), ends_.clear(); }
  bool add(std::int64_t begin, std::int64_t end) {
    if (!ends_.empty() && ends_.back() == begin) {
      ends_.back() = end;
      return true;
    }
    if (static_cast<std::int64_t>(starts_.size()) == limit_) return false;
    starts_.push_back(begin);
    ends_.push_back(end);
    return true;
  }
  // The runs of set bits of one partial tile's row, keys from k0.
  bool add_bits(const std::uint64_t* words, std::int64_t words_per_row, std::int64_t k0) {
    for (std::int64_t w = 0; w < words_per_row; ++w) {
      std::uint64_t word = words[w];
      while (word != 0) {
        const int first = std::countr_zero(word);
        const std::uint64_t shifted = word >> first;
        const int run = std::countr_one(shifted);
        const std::int64_t begin = k0 + 64 * w + first;
        if (!add(begin, begin + run)) return false;
        word = first + run >= 64 ? 0 : word & (~std::uint64_t{0} << (first + run));
      }
    }
    return true;
  }
  const std::vector<std::int64_t>& starts() const { return starts_; }
  const std::vector<std::int64_t>& ends() const { return ends_; }

 private:
  std::int64_t limit_;
  std::vector<std::int64_t> starts_, ends_;
};

}  // namespace

std::optional<RowIntervals> row_intervals(const TilePlan& plan, std::int64_t max_intervals) {
  if (max_intervals < 1) {
    throw std::invalid_argument("row_intervals: max_intervals must be >= 1, got " +
                                std::to_string(max_intervals));
  }
  constexpr std::int64_t kInt32Max = std::numeric_limits<std::int32_t>::max();
  if (plan.q_len() > kInt32Max || plan.kv_len() > kInt32Max) return std::nullopt;
  RowIntervals out;
  out.q_len = plan.q_len();
  out.count = max_intervals;
  const auto cells = static_cast<std::size_t>(max_intervals * out.q_len);
  out.starts.assign(cells, 0);
  out.ends.assign(cells, 0);
  const std::int64_t words_per_row = plan.words_per_row();
  RowBuilder row(max_intervals);
  for (std::int64_t q_block = 0; q_block < plan.num_q_blocks(); ++q_block) {
    const std::vector<Segment> segments = segments_of(plan, q_block);
    const IndexRange rows = plan.q_range(q_block);
    for (std::int64_t q = rows.begin; q < rows.end; ++q) {
      row.clear();
      for (const Segment& s : segments) {
        const bool fits =
            s.bits == nullptr
                ? row.add(s.begin, s.end)
                : row.add_bits(s.bits + (q - rows.begin) * words_per_row, words_per_row, s.begin);
        if (!fits) return std::nullopt;
      }
      for (std::size_t i = 0; i < row.starts().size(); ++i) {
        const auto cell = static_cast<std::size_t>(static_cast<std::int64_t>(i) * out.q_len + q);
        out.starts[cell] = static_cast<std::int32_t>(row.starts()[i]);
        out.ends[cell] = static_cast<std::int32_t>(row.ends()[i]);
      }
    }
  }
  return out;
}

}  // namespace tilesplash
