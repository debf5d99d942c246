#include "runtime/cpu_model.h"

#include <algorithm>
#include <cctype>
#include <fstream>

namespace tilesplash::runtime {
namespace {

std::string read_cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    std::string model = line.substr(colon + 1);
    const auto not_space = [](unsigned char c) { return !std::isspace(c); };
    model.erase(model.begin(), std::find_if(model.begin(), model.end(), not_space));
    model.erase(std::find_if(model.rbegin(), model.rend(), not_space).base(), model.end());
    if (!model.empty()) return model;
  }
  return "unknown";
}

}  // namespace

const std::string& cpu_model() {
  static const std::string model = read_cpu_model();
  return model;
}

}  // namespace tilesplash::runtime
