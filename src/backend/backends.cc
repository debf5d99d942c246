// The one list of compute backends this build can make (backend.h).
#include <array>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "tilesplash/attention.h"
#include "tilesplash/backend.h"

namespace tilesplash {
namespace {

constexpr std::array<std::string_view, 1> kBackends = {"cpu"};

}  // namespace

std::span<const std::string_view> backend_names() { return kBackends; }

std::unique_ptr<AttentionBackend> make_backend(std::string_view name,
                                               std::shared_ptr<ThreadingContext> context) {
  if (name == "cpu") return std::make_unique<AttentionRunner>(std::move(context));
  std::string message = "backend: unknown backend '";
  message.append(name).append("' (expected");
  for (std::size_t i = 0; i < kBackends.size(); ++i) {
    message.append(i == 0 ? " '" : ", '").append(kBackends[i]).append("'");
  }
  throw std::invalid_argument(message + ")");
}

}  // namespace tilesplash
