// Draws the progress bar with a carriage return and an erase-line escape, so
// it occupies one line of stderr and vanishes when done.
#include "progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <utility>

namespace tilesplash::cli {

bool progress_wanted(bool quiet) { return !quiet && isatty(STDERR_FILENO) == 1; }

Progress::Progress(std::string label, std::int64_t total, bool enabled)
    : label_(std::move(label)),
      total_(std::max<std::int64_t>(total, 1)),
      enabled_(enabled),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {
  draw(true);
}

Progress::~Progress() { finish(); }

void Progress::advance(std::int64_t steps) {
  done_ = std::min(total_, done_ + steps);
  draw(done_ == total_);
}

void Progress::set_detail(std::string detail) {
  detail_ = std::move(detail);
  draw(true);
}

void Progress::finish() {
  if (!enabled_ || !drawn_) return;
  std::fputs("\r\x1b[2K", stderr);
  std::fflush(stderr);
  drawn_ = false;
}

void Progress::draw(bool force) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  // Quick runs finish before the bar would be worth reading: stay silent.
  if (now - start_ < std::chrono::seconds(1)) return;
  if (!force && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * done_ / total_);
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const std::string bar = std::string(static_cast<std::size_t>(filled), '#') +
                          std::string(static_cast<std::size_t>(kWidth - filled), '.');
  std::fputs(
      fmt::format("\r\x1b[2K{} [{}] {}/{} {:.1f}s {}", label_, bar, done_, total_, elapsed, detail_)
          .c_str(),
      stderr);
  std::fflush(stderr);
  drawn_ = true;
}

}  // namespace tilesplash::cli
