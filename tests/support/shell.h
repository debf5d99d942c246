// Running the built CLI from tests: one popen loop shared by every CLI test,
// so the way stdout and the exit status are captured is written once.
#pragma once

#include <string>

namespace tilesplash::test {

struct ShellResult {
  int exit_code = -1;  // -1 when the command could not start or did not exit normally
  std::string out;     // everything the command wrote to stdout
};

// Runs `command` through /bin/sh; stderr goes wherever the command redirects it.
ShellResult run_shell(const std::string& command);

}  // namespace tilesplash::test
