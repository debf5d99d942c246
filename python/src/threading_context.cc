// tilesplash._core.ThreadingContext (see threading_context.h).
#include "threading_context.h"

#include <nanobind/nanobind.h>

#include <utility>

#include "bindings.h"

namespace tilesplash::python {

PyThreadingContext::PyThreadingContext(int threads, bool pin, int first_cpu)
    : context_(std::make_shared<ThreadingContext>(ThreadingOptions{threads, pin, first_cpu})) {}

PyThreadingContext::Lease::Lease(PyThreadingContext& owner) : owner_(owner) {
  {
    std::lock_guard<std::mutex> lock(owner_.mutex_);
    if (!owner_.idle_.empty()) {
      runner_ = std::move(owner_.idle_.back());
      owner_.idle_.pop_back();
    }
  }
  if (!runner_) runner_ = make_backend("cpu", owner_.context_);
}

PyThreadingContext::Lease::~Lease() {
  std::lock_guard<std::mutex> lock(owner_.mutex_);
  owner_.idle_.push_back(std::move(runner_));
}

void bind_threading(nb::module_& m) {
  using namespace nb::literals;
  nb::class_<PyThreadingContext>(m, "ThreadingContext")
      .def(nb::init<int, bool, int>(), "threads"_a, "pin"_a, "first_cpu"_a)
      .def_prop_ro("threads", &PyThreadingContext::threads)
      .def_prop_ro("pin", [](const PyThreadingContext& c) { return c.context()->options().pin; })
      .def_prop_ro("first_cpu",
                   [](const PyThreadingContext& c) { return c.context()->options().first_cpu; });
  m.def("hardware_threads", &hardware_threads,
        "CPUs this process may run on (its affinity mask), at least 1.");
}

}  // namespace tilesplash::python
