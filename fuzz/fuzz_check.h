// What both fuzz targets assert beyond "no crash, no sanitizer report": a
// rejected input yields exactly one InputError line naming the input (quoted,
// as every message quotes a file), and
// anything else escaping the parser is a bug, so it aborts for libFuzzer.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "tilesplash/tensor_io.h"

namespace tilesplash::fuzz {

inline void check_error_message(const InputError& error, const std::string& name) {
  const std::string message = error.what();
  if (message.rfind(quoted_name(name) + ": ", 0) != 0 || message.find('\n') != std::string::npos) {
    std::fprintf(stderr, "malformed error message: %s\n", message.c_str());
    std::abort();
  }
}

[[noreturn]] inline void bug(const char* what) {
  std::fprintf(stderr, "fuzz check failed: %s\n", what);
  std::abort();
}

}  // namespace tilesplash::fuzz
