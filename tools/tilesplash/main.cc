// The tilesplash command line. Exit codes: 0 success, 2 bad input (a CLI11
// parse error or std::invalid_argument from the library or a subcommand), 1
// anything else. Errors are one line on stderr: "tilesplash: error: ...".
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>

#include "commands.h"
#include "tilesplash/methods.h"
#include "tilesplash/output_set.h"
#include "tilesplash/tensor_io.h"
#include "tilesplash/version.h"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitInternal = 1;
constexpr int kExitBadInput = 2;

constexpr const char* kDescription =
    "tilesplash: tile-aware sparse attention on the CPU.\n"
    "Plans which tiles of the attention map a mask keeps (empty tiles skipped, full\n"
    "tiles mask-free, partial tiles bitmasked) and benchmarks the kernel on them.\n";

constexpr const char* kExamples =
    "Start here: `tilesplash demo` routes and runs a few heads of Wan 2.1 1.3B (480p)\n"
    "sparse and dense, and shows the speed-up and how close sparse comes to dense.\n"
    "\n"
    "Examples:\n"
    "  tilesplash demo\n"
    "  tilesplash demo --method radial --heads 2\n"
    "  tilesplash attend --q q.npy --k k.npy --v v.npy --out o.npy --mask causal\n"
    "  tilesplash plan --mask causal --q-len 64 --block-q 16 --block-kv 16 --kinds\n"
    "  tilesplash plan --mask 'local:left=4096,right=4096' --q-len 32760 --json\n"
    "  tilesplash bench --mask causal --q-len 4096 --head-dim 128 --dtype bf16 --compare-dense\n"
    "  tilesplash tune --preset wan2.1-14b-720p --density 0.25 --head-dim 128 --dtype bf16\n"
    "  tilesplash compare --geometry frames=8,height=8,width=12 --head-dim 64 --densities 0.1,0.3\n"
    "\n"
    "Run `tilesplash <command> --help` for a command's options; route, demo, tune, attend\n"
    "and compare take --method NAME, one of the registered methods: ";

int fail(int code, std::string_view message) {
  // On one line whatever it quotes (a path or a SPEC with a newline, an
  // escape sequence): printable_text escapes every control character.
  std::cerr << "tilesplash: error: " << tilesplash::printable_text(message) << '\n';
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  // Ctrl-C or kill during a write must not leave "*.tmp.*" beside an output.
  tilesplash::remove_temporaries_on_signals();
  CLI::App app{kDescription, "tilesplash"};
  app.set_version_flag("--version", tilesplash::kVersion);
  app.require_subcommand(0, 1);
  const tilesplash::cli::Command commands[] = {
      tilesplash::cli::add_plan_command(app),    tilesplash::cli::add_bench_command(app),
      tilesplash::cli::add_route_command(app),   tilesplash::cli::add_tune_command(app),
      tilesplash::cli::add_attend_command(app),  tilesplash::cli::add_demo_command(app),
      tilesplash::cli::add_compare_command(app),
  };
  // Set after the subcommands: CLI11 copies the parent's footer into each new one.
  app.footer(std::string(kExamples) + tilesplash::method_list_text() + " (docs/masks.md).");

  if (argc <= 1) {
    std::cout << app.help();
    return kExitOk;
  }
  try {
    app.parse(argc, argv);
    for (const auto& command : commands) {
      if (command.app->parsed()) {
        command.run();
        return kExitOk;
      }
    }
    return fail(kExitBadInput,
                "expected a command, e.g. demo, attend or plan (see tilesplash --help)");
  } catch (const CLI::ParseError& e) {
    // --help and --version arrive as "errors" whose exit code is success.
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    return fail(kExitBadInput, e.what());
  } catch (const std::invalid_argument& e) {
    return fail(kExitBadInput, e.what());
  } catch (const std::bad_alloc&) {
    return fail(kExitInternal, "out of memory");
  } catch (const std::exception& e) {
    return fail(kExitInternal, std::string("internal error: ") + e.what());
  }
}
