// tilesplash._core.methods(): the registry of video attention methods
// (methods.h), one dict per method in registry order, so the Python layer
// and tilesplash.diffusers list what the library registered, never a copy.
#include "tilesplash/methods.h"

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <string>

#include "bindings.h"

namespace tilesplash::python {

void bind_methods(nb::module_& m) {
  m.def("methods", [] {
    nb::dict result;
    for (const MethodInfo& method : methods()) {
      nb::dict entry;
      entry["summary"] = std::string(method.summary);
      entry["row_order"] = std::string(method.row_order);
      entry["spec"] = method.spec;
      entry["candidates"] = method.candidates;
      nb::list names;
      for (const std::string_view name : method.mask_names) names.append(std::string(name));
      entry["mask_names"] = nb::tuple(names);
      entry["takes_band"] = method.takes_band;
      entry["data_driven"] = method.data_driven;
      entry["choice"] = method.choice.empty()
                            ? nb::object(nb::none())
                            : nb::object(nb::str(std::string(method.choice).c_str()));
      result[nb::str(std::string(method.name).c_str())] = entry;
    }
    return result;
  });
  m.def("cluster_choice", [] { return std::string(cluster_choice()); });
  m.def("default_method", [] { return std::string(default_method()); });
}

}  // namespace tilesplash::python
