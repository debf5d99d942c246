// tilesplash._core.VideoGeometry and presets(): the shapes of video.h; and
// the library's routing and warm-up decisions (routing.h: decide_route,
// WarmupPolicy), which the flex and JAX front doors call instead of
// writing the rules again.
#include "tilesplash/video.h"

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "bindings.h"
#include "tilesplash/routing.h"

namespace tilesplash::python {
namespace {

TextPlacement to_placement(const std::string& text) {
  if (text == "none") return TextPlacement::kNone;
  if (text == "before") return TextPlacement::kBefore;
  if (text == "after") return TextPlacement::kAfter;
  throw std::invalid_argument("text_at: expected 'none', 'before' or 'after', got '" + text + "'");
}

using Table = nb::ndarray<const double, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using Column = nb::ndarray<const double, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

// decide_route() per row of a [heads, candidates] MSE table: (index per
// head, target met per head, [heads][candidates] sampled errors).
std::tuple<std::vector<std::int64_t>, std::vector<bool>, std::vector<std::vector<double>>>
decide_routes(const Table& mse, const Column& power, const std::vector<double>& densities,
              std::optional<double> density_budget, std::optional<double> error) {
  const std::size_t heads = mse.shape(0), count = mse.shape(1);
  if (power.shape(0) != heads) {
    throw std::invalid_argument("power: expected one per head (" + std::to_string(heads) +
                                "), got " + std::to_string(power.shape(0)));
  }
  if (error) check_error_target(*error, "error");
  const RoutePolicy policy{density_budget, error};
  std::tuple<std::vector<std::int64_t>, std::vector<bool>, std::vector<std::vector<double>>> out;
  auto& [index, met, errors] = out;
  for (std::size_t h = 0; h < heads; ++h) {
    const std::span<const double> row(mse.data() + h * count, count);
    const RouteChoice choice = decide_route(densities, row, power(h), policy);
    index.push_back(static_cast<std::int64_t>(choice.index));
    met.push_back(choice.target_met);
    std::vector<double> e;
    for (const double x : row) e.push_back(sampled_error(x, power(h)));
    errors.push_back(std::move(e));
  }
  return out;
}

void bind_routing_policy(nb::module_& m) {
  using namespace nb::literals;
  m.def("decide_routes", &decide_routes, "mse"_a, "power"_a, "densities"_a,
        "density_budget"_a.none(), "error"_a.none());
  m.def(
      "warmup_is_dense",
      [](std::int64_t dense_layers, std::int64_t dense_steps, std::int64_t layer,
         std::int64_t step) {
        return WarmupPolicy{dense_layers, dense_steps}.is_dense(layer, step);
      },
      "dense_layers"_a, "dense_steps"_a, "layer"_a, "step"_a);
  m.def("_set_policy_inverted_for_tests", &set_policy_inverted_for_tests, "inverted"_a);
  m.def("default_density_ladder", [] {
    const std::span<const double> ladder = default_density_ladder();
    return std::vector<double>(ladder.begin(), ladder.end());
  });
  m.def(
      "check_error_target", [](double error) { check_error_target(error, "error"); }, "error"_a);
  m.def(
      "ladder_name",
      [](const std::string& name, double density) { return ladder_name(name, density); }, "name"_a,
      "density"_a);
  m.def(
      "check_density_ladder",
      [](const std::vector<double>& densities) { check_density_ladder(densities, "densities"); },
      "densities"_a);
}

}  // namespace

void bind_video(nb::module_& m) {
  bind_routing_policy(m);
  using namespace nb::literals;
  nb::class_<VideoGeometry>(m, "VideoGeometry")
      .def(
          "__init__",
          [](VideoGeometry* self, nb::handle frames, nb::handle height, nb::handle width,
             nb::handle text, nb::handle text_at) {
            VideoGeometry g{int_arg(frames, "frames"), int_arg(height, "height"),
                            int_arg(width, "width"), int_arg(text, "text"),
                            to_placement(str_arg(text_at, "text_at"))};
            g.validate();
            new (self) VideoGeometry(g);
          },
          "frames"_a, "height"_a, "width"_a, "text"_a = 0, "text_at"_a = "none",
          nb::sig("def __init__(self, frames: int, height: int, width: int, text: int = 0, "
                  "text_at: str = 'none') -> None"))
      .def_static(
          "parse", [](nb::handle text) { return parse_video_geometry(str_arg(text, "text")); },
          "text"_a, nb::sig("def parse(text: str) -> VideoGeometry"))
      .def_ro("frames", &VideoGeometry::frames)
      .def_ro("height", &VideoGeometry::height)
      .def_ro("width", &VideoGeometry::width)
      .def_ro("text", &VideoGeometry::text)
      .def_prop_ro("text_at",
                   [](const VideoGeometry& g) { return std::string(to_string(g.text_at)); })
      .def_prop_ro("tokens", &VideoGeometry::tokens)
      .def_prop_ro("tokens_per_frame", &VideoGeometry::tokens_per_frame)
      .def_prop_ro("video_tokens", &VideoGeometry::video_tokens)
      .def_prop_ro("text_tokens", &VideoGeometry::text_tokens)
      .def("__str__", &VideoGeometry::to_string)
      .def("__getstate__", &VideoGeometry::to_string)
      .def("__setstate__",
           [](VideoGeometry& self, const std::string& text) {
             new (&self) VideoGeometry(parse_video_geometry(text));
           })
      .def("__repr__",
           [](const VideoGeometry& g) {
             std::string text = "tilesplash.VideoGeometry(" + std::to_string(g.frames) + ", " +
                                std::to_string(g.height) + ", " + std::to_string(g.width);
             if (g.text_at != TextPlacement::kNone) {
               text += ", text=" + std::to_string(g.text) + ", text_at='" +
                       std::string(to_string(g.text_at)) + "'";
             }
             return text + ")";
           })
      .def(
          "__eq__", [](const VideoGeometry& a, const VideoGeometry& b) { return a == b; },
          nb::is_operator())
      .def("__hash__", [](const VideoGeometry& g) {
        return static_cast<Py_ssize_t>(std::hash<std::string>{}(g.to_string()));
      });

  m.def("presets", [] {
    nb::dict result;
    for (const VideoPreset& preset : video_presets()) {
      nb::dict entry;
      entry["geometry"] = nb::cast(preset.geometry);
      entry["heads"] = preset.heads;
      entry["head_dim"] = preset.head_dim;
      entry["layers"] = preset.layers;
      entry["model"] = std::string(preset.model);
      result[nb::str(std::string(preset.name).c_str())] = entry;
    }
    return result;
  });
}

}  // namespace tilesplash::python
