// The registry of video attention methods: the one list. Each method's
// folder defines its entry (what it is, its SPEC term, its builder from
// density to candidates, how its masks run); registering a method is a line
// here. The order is the order of every list users see (--help, errors,
// tilesplash.methods()), the SPEC terms after the core ones.
#include "methods/registry.h"

#include <array>
#include <stdexcept>

namespace tilesplash::detail {

const MethodEntry& svg_method();       // methods/band
const MethodEntry& spatial_method();   // methods/band
const MethodEntry& temporal_method();  // methods/band
const MethodEntry& radial_method();    // methods/radial
const MethodEntry& sta_method();       // methods/sta
const MethodEntry& mix_method();       // methods/mix
const MethodEntry& svg2_method();      // methods/svg2
const MethodEntry& pooled_method();    // methods/pooled

std::span<const MethodEntry* const> method_registry() {
  static const std::array kMethods = {
      &svg_method(),       // Sparse VideoGen: spatial or temporal, routed
      &spatial_method(),   // its spatial band alone
      &temporal_method(),  // its temporal band alone
      &radial_method(),    // Radial Attention
      &sta_method(),       // Sliding Tile Attention
      &mix_method(),       // all of the families above, routed
      &svg2_method(),      // Sparse VideoGen 2: semantic clusters
      &pooled_method(),    // pooled scores: SpargeAttn, XAttention
  };
  return kMethods;
}

// The method a front door runs when its caller names none (VideoAttention
// without candidates, the CLI's --method, Python's method=): declared here,
// so no caller spells a method's name.
const MethodEntry& default_method_entry() { return svg_method(); }

std::string_view mask_family(const Mask& mask) {
  for (const MethodEntry* method : method_registry()) {
    if (method->run != nullptr && method->run(mask)) return method->info.name;
  }
  return {};
}

const MethodEntry* find_method(std::string_view name) {
  for (const MethodEntry* method : method_registry()) {
    if (method->info.name == name) return method;
  }
  return nullptr;
}

}  // namespace tilesplash::detail

namespace tilesplash {

std::string_view default_method() { return detail::default_method_entry().info.name; }

std::string_view cluster_choice() {
  // Looked up once: the front door names every clustered head with it.
  static const std::string_view choice = [] {
    const detail::MethodEntry* found = nullptr;
    for (const detail::MethodEntry* method : detail::method_registry()) {
      if (!method->info.data_driven || method->clusters == nullptr) continue;
      // Two would need the front door to tell their heads apart (a choice
      // per method in VideoAttentionOptions), which it does not yet.
      if (found != nullptr || method->info.choice.empty()) {
        throw std::logic_error("method registry: expected one data-driven method with a choice");
      }
      found = method;
    }
    if (found == nullptr) throw std::logic_error("method registry: no data-driven method");
    return found->info.choice;
  }();
  return choice;
}

}  // namespace tilesplash
