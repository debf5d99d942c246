#include "names.h"

#include <stdexcept>

namespace tilesplash::cli {

TuneClock parse_clock(std::string_view name) {
  for (const ClockName& clock : kClocks) {
    if (clock.name == name) return clock.clock;
  }
  throw std::invalid_argument("--clock: expected " + or_list(names_of(kClocks)) + ", got '" +
                              std::string(name) + "'");
}

std::vector<std::string> names_of(const std::array<ClockName, kClocks.size()>& clocks) {
  std::vector<std::string> names;
  for (const ClockName& clock : clocks) names.emplace_back(clock.name);
  return names;
}

std::string or_list(const std::vector<std::string>& names) {
  std::string text;
  for (std::size_t i = 0; i < names.size(); ++i) {
    text += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  }
  return text;
}

}  // namespace tilesplash::cli
