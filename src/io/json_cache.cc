#include "io/json_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

#include "io/atomic_file.h"
#include "tilesplash/output_set.h"
#include "tilesplash/version.h"

namespace tilesplash::io {
namespace {

constexpr const char* kFormat = "tilesplash-tuning-cache";
constexpr int kFormatVersion = 1;

nlohmann::json empty_cache() {
  nlohmann::json cache;
  cache["format"] = kFormat;
  cache["version"] = kFormatVersion;
  cache["library"] = kVersion;
  cache["entries"] = nlohmann::json::object();
  return cache;
}

// The parsed file when it exists and is current; nullopt (after a warning
// when the file exists but cannot be trusted) otherwise.
std::optional<nlohmann::json> load(const std::filesystem::path& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) {
    warn_once("tuning cache " + path.string() + " cannot be read; ignored");
    return std::nullopt;
  }
  nlohmann::json cache = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  // Fields of the wrong JSON type are corrupt too: check every type before use.
  const auto string_or_absent = [&](const char* name) {
    return !cache.contains(name) || cache[name].is_string();
  };
  if (cache.is_discarded() || !cache.is_object() || !cache.contains("entries") ||
      !cache["entries"].is_object() || !string_or_absent("format") ||
      !string_or_absent("library")) {
    warn_once("tuning cache " + path.string() + " is corrupt; ignored (retune to replace it)");
    return std::nullopt;
  }
  const auto field = [&](const char* name) {
    return cache.contains(name) ? cache[name].dump() : std::string("none");
  };
  if (cache.value("format", std::string()) != kFormat || !cache.contains("version") ||
      cache["version"] != kFormatVersion || cache.value("library", std::string()) != kVersion) {
    warn_once("tuning cache " + path.string() + " is stale (format version " + field("version") +
              ", library " + field("library") + "; this build writes version " +
              std::to_string(kFormatVersion) + ", library " + kVersion +
              "); ignored (retune to replace it)");
    return std::nullopt;
  }
  return cache;
}

// flock() on a lock file for the scope; released when the descriptor closes,
// also when the process dies, so a killed run never leaves the cache locked.
class CacheLock {
 public:
  explicit CacheLock(const std::string& path)
      : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666)) {
    if (fd_ < 0) {
      throw std::runtime_error(path +
                               ": cannot open the tuning cache lock: " + std::strerror(errno));
    }
    while (::flock(fd_, LOCK_EX) != 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      ::close(fd_);
      throw std::runtime_error(path + ": cannot lock the tuning cache: " + std::strerror(error));
    }
  }
  ~CacheLock() { ::close(fd_); }
  CacheLock(const CacheLock&) = delete;
  CacheLock& operator=(const CacheLock&) = delete;

 private:
  int fd_;
};

}  // namespace

void warn_once(const std::string& message) {
  static std::mutex mutex;
  static std::set<std::string> seen;
  std::lock_guard<std::mutex> lock(mutex);
  if (seen.insert(message).second) {
    std::fprintf(stderr, "tilesplash: warning: %s\n", message.c_str());
  }
}

std::filesystem::path default_cache_path() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  // The XDG spec: a relative XDG_CACHE_HOME is invalid and must be ignored.
  if (xdg != nullptr && xdg[0] == '/') {
    return std::filesystem::path(xdg) / "tilesplash" / "tuning.json";
  }
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] != '\0') {
    return std::filesystem::path(home) / ".cache" / "tilesplash" / "tuning.json";
  }
  return std::filesystem::path(".cache") / "tilesplash" / "tuning.json";
}

JsonCache::JsonCache(std::filesystem::path path) : path_(std::move(path)) {
  if (path_.empty()) throw std::invalid_argument("TuningCache: path must not be empty");
}

std::optional<nlohmann::json> JsonCache::entry(const std::string& key) const {
  std::optional<nlohmann::json> cache = load(path_);
  if (!cache) return std::nullopt;
  nlohmann::json& entries = (*cache)["entries"];
  const auto it = entries.find(key);
  if (it == entries.end()) return std::nullopt;
  return std::move(*it);
}

void JsonCache::put(const std::string& key, nlohmann::json value) const {
  std::error_code error;
  if (path_.has_parent_path()) std::filesystem::create_directories(path_.parent_path(), error);
  if (error) {
    throw std::runtime_error(path_.parent_path().string() +
                             ": cannot create the tuning cache directory: " + error.message());
  }
  // Read-modify-rename under an exclusive lock on a file beside the cache (the
  // cache itself is replaced by each rename, so it cannot carry the lock):
  // two writers at once must both keep their entries. Beside the file the
  // rename replaces, so writers through different links to it share the lock.
  const CacheLock lock(link_target(path_.string()) + ".lock");
  nlohmann::json cache = load(path_).value_or(empty_cache());
  cache["entries"][key] = std::move(value);
  AtomicFile file(path_.string());
  file.write(cache.dump(2) + "\n");
  file.commit();
}

void JsonCache::check_writable() const {
  std::error_code error;
  if (path_.has_parent_path()) std::filesystem::create_directories(path_.parent_path(), error);
  if (error) {
    throw std::invalid_argument("tuning cache " + path_.string() + ": cannot create directory " +
                                path_.parent_path().string() + " (" + error.message() +
                                "); expected a writable directory");
  }
  OutputSet().add_output(path_.string(), "tuning cache");
}

}  // namespace tilesplash::io
