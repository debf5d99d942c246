// tilesplash._core.plan() and TilePlan: a MaskPlan (video_plan.h) from the
// shared plan cache, its CLI fields as a dict, its tile kinds as a NumPy
// uint8 array, its block-sparse arrays (block_sparse.h) as NumPy arrays,
// the bitmask table a view that keeps the plan alive, and its rows as
// intervals (row_intervals.h).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <optional>
#include <string>

#include "bindings.h"
#include "tilesplash/block_sparse.h"
#include "tilesplash/plan_cache.h"
#include "tilesplash/row_intervals.h"
#include "tilesplash/video_plan.h"

namespace tilesplash::python {
namespace {

nb::dict plan_stats(const MaskPlan& plan) { return to_dict(plan_fields(plan)); }

nb::ndarray<nb::numpy, std::uint8_t, nb::ndim<2>> plan_kinds(const MaskPlan& mask_plan) {
  const TilePlan& plan = *mask_plan.plan;
  const std::int64_t rows = plan.num_q_blocks(), cols = plan.num_kv_blocks();
  auto* kinds = new std::uint8_t[static_cast<std::size_t>(rows * cols)];
  nb::capsule owner(kinds, [](void* p) noexcept { delete[] static_cast<std::uint8_t*>(p); });
  {
    nb::gil_scoped_release release;
    for (std::int64_t r = 0; r < rows; ++r) {
      std::fill(kinds + r * cols, kinds + (r + 1) * cols,
                static_cast<std::uint8_t>(TileKind::kEmpty));
      for (const PlanTile& tile : plan.tiles(r)) {
        kinds[r * cols + tile.kv_block] =
            static_cast<std::uint8_t>(tile.is_full() ? TileKind::kFull : TileKind::kPartial);
      }
    }
  }
  return {kinds, {static_cast<std::size_t>(rows), static_cast<std::size_t>(cols)}, owner};
}

// A NumPy array that owns `values` (moved to the heap, freed with the array).
template <typename T>
nb::ndarray<nb::numpy, T, nb::ndim<1>> owned_array(std::vector<T>&& values) {
  auto* heap = new std::vector<T>(std::move(values));
  nb::capsule owner(heap, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return {heap->data(), {heap->size()}, owner};
}

nb::dict plan_block_sparse(const MaskPlan& mask_plan) {
  BlockSparseArrays arrays;
  {
    nb::gil_scoped_release release;
    arrays = block_sparse_arrays(*mask_plan.plan);
  }
  nb::dict result;
  result["q_len"] = arrays.q_len;
  result["kv_len"] = arrays.kv_len;
  result["block_q"] = arrays.block_q;
  result["block_kv"] = arrays.block_kv;
  result["q_blocks"] = arrays.num_q_blocks;
  result["kv_blocks"] = arrays.num_kv_blocks;
  result["words_per_row"] = arrays.words_per_row;
  // The table is the plan's own memory: the array holds a reference to the plan.
  auto* keep = new std::shared_ptr<const TilePlan>(mask_plan.plan);
  nb::capsule owner(
      keep, [](void* p) noexcept { delete static_cast<std::shared_ptr<const TilePlan>*>(p); });
  const std::size_t distinct = static_cast<std::size_t>(arrays.distinct_partial());
  nb::ndarray<nb::numpy, const std::uint64_t, nb::ndim<3>> bits(
      arrays.bits.data(),
      {distinct, static_cast<std::size_t>(arrays.block_q),
       static_cast<std::size_t>(arrays.words_per_row)},
      owner);
  result["bits"] = bits;
  result["full_offsets"] = owned_array(std::move(arrays.full_offsets));
  result["full_indices"] = owned_array(std::move(arrays.full_indices));
  result["partial_offsets"] = owned_array(std::move(arrays.partial_offsets));
  result["partial_indices"] = owned_array(std::move(arrays.partial_indices));
  result["partial_ids"] = owned_array(std::move(arrays.partial_ids));
  return result;
}

// (starts, ends), int32 [count, q_len] each, or None when a row needs more.
nb::object plan_row_intervals(const MaskPlan& mask_plan, std::int64_t max_intervals) {
  std::optional<RowIntervals> rows;
  {
    nb::gil_scoped_release release;
    rows = row_intervals(*mask_plan.plan, max_intervals);
  }
  if (!rows) return nb::none();
  const auto shape = [&](nb::ndarray<nb::numpy, std::int32_t, nb::ndim<1>> flat) {
    return flat.cast().attr("reshape")(rows->count, rows->q_len);
  };
  return nb::make_tuple(shape(owned_array(std::move(rows->starts))),
                        shape(owned_array(std::move(rows->ends))));
}

}  // namespace

void bind_plan(nb::module_& m) {
  using namespace nb::literals;
  nb::class_<MaskPlan>(m, "TilePlan")
      .def_prop_ro("mask", [](const MaskPlan& p) { return p.mask; })
      .def_prop_ro("plan_mask", [](const MaskPlan& p) { return p.plan->mask(); })
      .def_prop_ro("q_len", [](const MaskPlan& p) { return p.plan->q_len(); })
      .def_prop_ro("kv_len", [](const MaskPlan& p) { return p.plan->kv_len(); })
      .def_prop_ro("block_q", [](const MaskPlan& p) { return p.plan->blocks().block_q; })
      .def_prop_ro("block_kv", [](const MaskPlan& p) { return p.plan->blocks().block_kv; })
      .def_prop_ro("q_blocks", [](const MaskPlan& p) { return p.plan->num_q_blocks(); })
      .def_prop_ro("kv_blocks", [](const MaskPlan& p) { return p.plan->num_kv_blocks(); })
      .def("stats", &plan_stats)
      .def("kinds", &plan_kinds)
      .def("block_sparse", &plan_block_sparse)
      .def("row_intervals", &plan_row_intervals, "max_intervals"_a);

  m.def(
      "plan",
      [](const Mask& mask, std::int64_t q_len, std::optional<std::int64_t> kv_len,
         std::int64_t block_q, std::int64_t block_kv, bool original_order) {
        nb::gil_scoped_release release;
        const BlockSizes blocks{block_q, block_kv};
        if (original_order) {
          // The mask exactly as given, not what a temporal or sta mask runs as.
          MaskPlan result{mask,
                          PlanCache::shared().get(mask, q_len, kv_len.value_or(q_len), blocks),
                          std::nullopt, std::nullopt, std::nullopt};
          return result;
        }
        return plan_mask(mask, q_len, kv_len.value_or(q_len), blocks, &PlanCache::shared());
      },
      "mask"_a, "q_len"_a, "kv_len"_a = nb::none(), "block_q"_a = 256, "block_kv"_a = 256,
      "original_order"_a = false);

  m.def("plan_cache_stats", [] {
    const PlanCacheStats stats = PlanCache::shared().stats();
    nb::dict result;
    result["hits"] = stats.hits;
    result["misses"] = stats.misses;
    result["size"] = stats.size;
    result["capacity"] = PlanCache::shared().capacity();
    result["build_seconds"] = stats.build_seconds;
    return result;
  });
  m.def("clear_plan_cache", [] { PlanCache::shared().clear(); });
  m.def(
      "set_plan_cache_capacity",
      [](std::size_t capacity) { PlanCache::shared().set_capacity(capacity); }, "capacity"_a);
}

}  // namespace tilesplash::python
