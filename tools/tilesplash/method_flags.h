// The method options beyond --density (MethodOptions): pooled's --p, --floor,
// --gate and --order, and a mix's --families, for every command that runs a method
// by name with its options (route, demo). Ranges are checked as the flags are
// read; which method takes them, by the library (method_attention_options).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "tilesplash/candidates.h"

namespace tilesplash::cli {

struct MethodFlags {
  double p = 0.0;
  std::int64_t floor = 0;
  double gate = 0.0;
  std::string order;
  std::vector<std::string> families;
  // Set by add_method_flags: whether each was given.
  CLI::Option* p_option = nullptr;
  CLI::Option* floor_option = nullptr;
  CLI::Option* gate_option = nullptr;
  CLI::Option* order_option = nullptr;

  // The flags given, into `options` (those not given left unset).
  void apply(MethodOptions& options) const;
};

void add_method_flags(CLI::App& app, MethodFlags& flags, const std::string& prefix = "");

}  // namespace tilesplash::cli
