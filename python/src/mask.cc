// tilesplash._core.Mask: the library's Mask value (mask.h, mask_spec.h, the
// video masks of video.h, radial.h and sta.h), with its SPEC as str().
#include "tilesplash/mask.h"

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "bindings.h"
#include "tilesplash/mask_spec.h"
#include "tilesplash/radial.h"
#include "tilesplash/sta.h"
#include "tilesplash/tile_granular.h"
#include "tilesplash/video.h"

namespace tilesplash::python {
namespace {

// The library's rules: exactly one of band and density (resolve_band),
// exactly one of decay and density (resolve_radial_decay).
Mask video(VideoMaskKind kind, const VideoGeometry& geometry, std::optional<std::int64_t> band,
           bool sink, bool text_full, std::optional<double> density) {
  geometry.validate();
  const VideoMaskOptions options{sink, text_full};
  BandForm form;
  form.band = band;
  form.density = density;
  return video_mask(kind, geometry, resolve_band(kind, geometry, form, options), options);
}

Mask radial(const VideoGeometry& geometry, std::optional<double> decay,
            std::optional<double> density, std::int64_t block, bool sink) {
  geometry.validate();
  RadialOptions options;
  options.block = block;
  options.sink = sink;
  options.decay = resolve_radial_decay(geometry, decay, density, options);
  return radial_mask(geometry, options);
}

using RowIndices = nb::ndarray<const std::int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

// keep[i][k] = mask.keeps(rows[i], k) for k in [0, kv_len): the mask on a few
// query rows (a router's sampled rows) without a plan. rows must lie in
// [0, q_len) and the lengths fit the mask (check_lengths).
nb::ndarray<nb::numpy, bool, nb::ndim<2>> mask_rows(const Mask& mask, RowIndices rows,
                                                    std::int64_t q_len, std::int64_t kv_len) {
  if (q_len < 1) throw std::invalid_argument("q_len: must be >= 1, got " + std::to_string(q_len));
  if (kv_len < 1) {
    throw std::invalid_argument("kv_len: must be >= 1, got " + std::to_string(kv_len));
  }
  mask.check_lengths(q_len, kv_len);
  const std::size_t count = rows.shape(0);
  for (std::size_t i = 0; i < count; ++i) {
    if (rows(i) < 0 || rows(i) >= q_len) {
      throw std::invalid_argument(
          "rows: every row must be in [0, q_len = " + std::to_string(q_len) + "), got " +
          std::to_string(rows(i)) + " at position " + std::to_string(i));
    }
  }
  const std::size_t width = static_cast<std::size_t>(kv_len);
  auto* keep = new bool[count * width];
  nb::capsule owner(keep, [](void* p) noexcept { delete[] static_cast<bool*>(p); });
  {
    nb::gil_scoped_release release;
    static_assert(sizeof(bool) == sizeof(std::uint8_t));
    for (std::size_t i = 0; i < count; ++i) {
      mask.eval_row(rows(i), 0, kv_len, reinterpret_cast<std::uint8_t*>(keep + i * width));
    }
  }
  return {keep, {count, width}, owner};
}

}  // namespace

void bind_mask(nb::module_& m) {
  using namespace nb::literals;
  nb::class_<Mask>(m, "Mask")
      .def_static("dense", &Mask::dense)
      .def_static("causal", &Mask::causal, "offset"_a = 0)
      .def_static(
          "local",
          [](std::optional<std::int64_t> left, std::optional<std::int64_t> right,
             std::int64_t offset) { return Mask::local(left, right, offset); },
          "left"_a = nb::none(), "right"_a = nb::none(), "offset"_a = 0)
      .def_static("chunked", &Mask::chunked_causal, "size"_a)
      .def_static("key_range", &Mask::key_range, "begin"_a, "end"_a)
      .def_static("random", &Mask::random, "density"_a, "seed"_a = 0)
      .def_static(
          "parse", [](const std::string& spec) { return parse_mask_spec(spec); }, "spec"_a)
      .def_static(
          "spatial",
          [](const VideoGeometry& g, std::optional<std::int64_t> band, bool sink, bool text_full,
             std::optional<double> density) {
            return video(VideoMaskKind::kSpatial, g, band, sink, text_full, density);
          },
          "geometry"_a, "band"_a = nb::none(), "sink"_a = false, "text_full"_a = false,
          "density"_a = nb::none())
      .def_static(
          "temporal",
          [](const VideoGeometry& g, std::optional<std::int64_t> band, bool sink, bool text_full,
             std::optional<double> density) {
            return video(VideoMaskKind::kTemporal, g, band, sink, text_full, density);
          },
          "geometry"_a, "band"_a = nb::none(), "sink"_a = false, "text_full"_a = false,
          "density"_a = nb::none())
      .def_static("radial", &radial, "geometry"_a, "decay"_a = nb::none(), "density"_a = nb::none(),
                  "block"_a = 128, "sink"_a = false)
      .def_static(
          "sta",
          [](const VideoGeometry& g, std::array<std::int64_t, 3> window,
             std::array<std::int64_t, 3> tile) {
            g.validate();
            return sta_mask(g, {tile, window});
          },
          "geometry"_a, "window"_a, "tile"_a)
      .def_static(
          "any_of", [](const std::vector<Mask>& masks) { return Mask::any_of(masks); }, "masks"_a)
      .def_static(
          "all_of", [](const std::vector<Mask>& masks) { return Mask::all_of(masks); }, "masks"_a)
      .def(
          "__or__", [](const Mask& a, const Mask& b) { return a | b; }, nb::is_operator())
      .def(
          "__and__", [](const Mask& a, const Mask& b) { return a & b; }, nb::is_operator())
      .def(
          "__eq__", [](const Mask& a, const Mask& b) { return a == b; }, nb::is_operator())
      .def("__hash__", [](const Mask& mask) { return static_cast<Py_ssize_t>(mask.hash()); })
      .def("__str__", &Mask::to_string)
      .def("keeps", &Mask::keeps, "q"_a, "k"_a)
      .def("rows", &mask_rows, "rows"_a, "q_len"_a, "kv_len"_a)
      .def("check_lengths", &Mask::check_lengths, "q_len"_a, "kv_len"_a)
      .def(
          "tile_granular",
          [](const Mask& mask, std::int64_t q_len, std::int64_t kv_len, std::int64_t block_q,
             std::int64_t block_kv) {
            return tile_granular_mask(mask, q_len, kv_len, {block_q, block_kv});
          },
          "q_len"_a, "kv_len"_a, "block_q"_a, "block_kv"_a)
      .def_static("segment_minus", &segment_minus, "segment"_a, "band"_a, "first"_a, "stride"_a);
  // The granularity's name checked by the library's rule ("token" or "tile").
  m.def(
      "check_granularity",
      [](const std::string& text) { return std::string(to_string(parse_granularity(text))); },
      "granularity"_a);
}

}  // namespace tilesplash::python
