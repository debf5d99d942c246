// The registry of video attention methods. A method is what a front door
// runs by name ("svg", "radial", ...): the masks its heads may run, built
// for a target density, and the row order they run in. One list, in
// src/methods/registry.cc, holds every method; each entry brings its SPEC
// term (a method with a mask family of its own), its builder from density to
// candidates (candidates.h: method_candidates), and how its masks execute
// (mask_run, plan_mask). The C++ API (method_names, attention_method_names,
// method_attention_options, parse_mask_spec), every CLI command, the Python
// bindings (tilesplash.methods()) and diffusers iterate over it, so adding
// a method touches its registry entry and its folder (docs/extending.md).
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace tilesplash {

struct MethodInfo {
  std::string_view name;
  std::string_view summary;    // what the method is, one line
  std::string_view row_order;  // the order its heads run Q, K and V in
  bool spec = false;           // a mask SPEC term of the same name exists (mask_spec.h)
  // That term's syntax for help texts, e.g. "radial:GEOM,decay=D|density=S
  // [,block=B][,sink]" (GEOM: preset=NAME or frames=F,height=h,width=w
  // [,text=T,text_at=before|after]); empty without a term.
  std::string_view spec_syntax = {};
  // method_candidates() builds its masks from a density; false when each
  // head's masks come from its own data (svg2: see clusters.h).
  bool candidates = false;
  // The names its heads report (and `force` accepts besides "dense") when
  // they do not depend on the geometry; empty when they do (sta windows).
  std::span<const std::string_view> mask_names = {};
  // Its heads share one band whose half-width a caller may give in tokens
  // (MethodOptions::band), and the front door builds its candidates on that
  // band itself (svg). Code that shows or plans "the band" asks this flag,
  // never the method's name.
  bool takes_band = false;
  // Each head's masks come from its own data (Q and K), not from the
  // geometry and a density (svg2): no candidate list, the clusters instead.
  bool data_driven = false;
  // What a data-driven method's heads report as their choice (and `force`
  // accepts); empty for the others, whose heads report a candidate's name.
  std::string_view choice = {};
};

// Every registered method, in registry order.
std::span<const MethodInfo> methods();

// The method of that name; throws std::invalid_argument("<who>: unknown
// method '<name>' (expected svg, spatial, ... or svg2)").
const MethodInfo& method_info(std::string_view name, std::string_view who = "method");

// The method a front door runs when its caller names none (the registry
// declares it: "svg", Sparse VideoGen's routed spatial and temporal pair).
std::string_view default_method();

// The choice that heads running the data-driven method report (the entry's
// `choice`, "svg2"): the name a front door gives a head that runs its own
// clusters. The registry has exactly one data-driven method.
std::string_view cluster_choice();

// "svg, spatial, temporal, radial, sta, mix or svg2": the names for messages
// and --help texts.
std::string method_list_text();

}  // namespace tilesplash
