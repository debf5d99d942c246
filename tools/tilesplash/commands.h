// The CLI's subcommands. Each registers its options on the parent app and
// hands back what to run once parsing succeeded, so main() owns the error
// handling and exit codes in one place.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace tilesplash::cli {

struct Command {
  CLI::App* app = nullptr;
  // Throws std::invalid_argument for bad input (exit 2), anything else for
  // internal failures (exit 1).
  std::function<void()> run;
};

Command add_plan_command(CLI::App& parent);
Command add_bench_command(CLI::App& parent);
Command add_route_command(CLI::App& parent);
Command add_tune_command(CLI::App& parent);
Command add_attend_command(CLI::App& parent);
Command add_demo_command(CLI::App& parent);
Command add_compare_command(CLI::App& parent);

}  // namespace tilesplash::cli
