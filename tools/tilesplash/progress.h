// A progress bar on stderr for the long-running subcommands (attend, demo),
// so a user watching a terminal sees that work advances. It draws only when
// stderr is a terminal and --quiet is off (piped or redirected runs and tests
// get no control characters at all), and only once a run has lasted a second.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace tilesplash::cli {

class Progress {
 public:
  // `total` steps; `enabled` is usually progress_wanted(quiet).
  Progress(std::string label, std::int64_t total, bool enabled);
  ~Progress();  // clears the bar if it is still drawn
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Marks `steps` more steps done and redraws (at most ~10 times a second).
  void advance(std::int64_t steps = 1);
  // Names what is running now, e.g. "head 3 dense".
  void set_detail(std::string detail);
  // Erases the bar; later output starts on a clean line.
  void finish();

 private:
  void draw(bool force);

  std::string label_;
  std::string detail_;
  std::int64_t total_ = 1;
  std::int64_t done_ = 0;
  bool enabled_ = false;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

// True when stderr is a terminal and the user did not ask for --quiet.
bool progress_wanted(bool quiet);

}  // namespace tilesplash::cli
