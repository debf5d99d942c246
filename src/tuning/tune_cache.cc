// The tuning cache on disk and choose_blocks(), the library's answer when a
// caller gives no block sizes. A tuned choice is only worth anything if it is
// still true, so the file is versioned twice (format and library version: a
// new kernel makes old timings stale), every entry is range-checked before
// use, and anything doubtful is ignored with one warning rather than trusted.
// Writes go through io::AtomicFile, so a reader never sees half a file, under
// an flock so that concurrent writers never lose each other's entries.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>

#include "io/atomic_file.h"
#include "tilesplash/kernel_limits.h"
#include "tilesplash/output_set.h"
#include "tilesplash/tuning.h"
#include "tilesplash/version.h"

namespace tilesplash {
namespace {

constexpr const char* kFormat = "tilesplash-tuning-cache";
constexpr int kFormatVersion = 1;

// Each distinct warning is printed once per process.
void warn_once(const std::string& message) {
  static std::mutex mutex;
  static std::set<std::string> seen;
  std::lock_guard<std::mutex> lock(mutex);
  if (seen.insert(message).second) {
    std::fprintf(stderr, "tilesplash: warning: %s\n", message.c_str());
  }
}

bool valid_blocks(const BlockSizes& b) {
  return kernel_limits::valid_block_q(b.block_q) && kernel_limits::valid_block_kv(b.block_kv);
}

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

void TuningCache::check_writable() const {
  std::error_code error;
  if (path_.has_parent_path()) std::filesystem::create_directories(path_.parent_path(), error);
  if (error) {
    throw std::invalid_argument("tuning cache " + path_.string() + ": cannot create directory " +
                                path_.parent_path().string() + " (" + error.message() +
                                "); expected a writable directory");
  }
  OutputSet().add_output(path_.string(), "tuning cache");
}

std::filesystem::path TuningCache::default_path() {
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

TuningCache::TuningCache(std::filesystem::path path) : path_(std::move(path)) {
  if (path_.empty()) throw std::invalid_argument("TuningCache: path must not be empty");
}

std::optional<BlockSizes> TuningCache::lookup(const TuneKey& key) const {
  const std::optional<nlohmann::json> cache = load(path_);
  if (!cache) return std::nullopt;
  const std::string name = key.to_string();
  const nlohmann::json& entries = (*cache)["entries"];
  const auto it = entries.find(name);
  if (it == entries.end()) return std::nullopt;
  const nlohmann::json& entry = *it;
  if (entry.is_object() && entry.contains("block_q") && entry.contains("block_kv") &&
      entry["block_q"].is_number_integer() && entry["block_kv"].is_number_integer()) {
    const BlockSizes blocks{entry["block_q"].get<std::int64_t>(),
                            entry["block_kv"].get<std::int64_t>()};
    if (valid_blocks(blocks)) return blocks;
  }
  warn_once("tuning cache " + path_.string() + ": invalid entry for " + name +
            " (expected block_q " + kernel_limits::block_q_rule() + " and block_kv " +
            kernel_limits::block_kv_rule() + "); ignored");
  return std::nullopt;
}

void TuningCache::store(const TuneKey& key, BlockSizes blocks, double seconds) const {
  if (!valid_blocks(blocks)) {
    throw std::invalid_argument(
        "TuningCache::store: blocks must have block_q " + kernel_limits::block_q_rule() +
        " and block_kv " + kernel_limits::block_kv_rule() + ", got " +
        std::to_string(blocks.block_q) + " x " + std::to_string(blocks.block_kv));
  }
  std::error_code error;
  if (path_.has_parent_path()) std::filesystem::create_directories(path_.parent_path(), error);
  if (error) {
    throw std::runtime_error(path_.parent_path().string() +
                             ": cannot create the tuning cache directory: " + error.message());
  }
  // Read-modify-rename under an exclusive lock on a file beside the cache (the
  // cache itself is replaced by each rename, so it cannot carry the lock):
  // two tune runs at once must both keep their entries.
  const CacheLock lock(path_.string() + ".lock");
  nlohmann::json cache = load(path_).value_or(empty_cache());
  nlohmann::json entry;
  entry["block_q"] = blocks.block_q;
  entry["block_kv"] = blocks.block_kv;
  entry["seconds"] = seconds;
  cache["entries"][key.to_string()] = std::move(entry);
  io::AtomicFile file(path_.string());
  file.write(cache.dump(2) + "\n");
  file.commit();
}

BlockChoice choose_blocks(const Mask& mask, std::int64_t q_len, std::int64_t kv_len,
                          std::int64_t head_dim, DType dtype, int threads) {
  BlockChoice choice;
  choice.key = make_tune_key(mask, q_len, kv_len, head_dim, dtype, threads);
  if (const std::optional<BlockSizes> cached = TuningCache().lookup(choice.key)) {
    choice.blocks = *cached;
    choice.from_cache = true;
  } else {
    choice.blocks = heuristic_blocks(q_len, kv_len, head_dim, dtype);
  }
  return choice;
}

}  // namespace tilesplash
