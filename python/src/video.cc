// tilesplash._core.VideoGeometry and presets(): the shapes of video.h.
#include "tilesplash/video.h"

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <stdexcept>
#include <string>

#include "bindings.h"

namespace tilesplash::python {
namespace {

TextPlacement to_placement(const std::string& text) {
  if (text == "none") return TextPlacement::kNone;
  if (text == "before") return TextPlacement::kBefore;
  if (text == "after") return TextPlacement::kAfter;
  throw std::invalid_argument("text_at: expected 'none', 'before' or 'after', got '" + text + "'");
}

}  // namespace

void bind_video(nb::module_& m) {
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
