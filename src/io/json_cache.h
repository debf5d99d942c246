// The on-disk cache file of measured choices: one versioned JSON object of
// keyed entries, shared by the tile tuner (tilesplash/tuning.h: tile sizes and
// kernel variants per shape) and the kernel's product-path calibration
// (kernel/product_path.cc: the dot-product and FMA rates per CPU). A choice
// measured on one machine is only worth anything while it is still true, so
// the file is versioned twice (format and library version: a new kernel makes
// old timings stale), and a corrupt, unreadable or stale file is ignored with
// one warning on stderr, never trusted. Writes are read-modify-rename under an
// flock of "<path>.lock", so a reader never sees half a file and concurrent
// writers (threads or processes) never lose each other's entries.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace tilesplash::io {

// $XDG_CACHE_HOME/tilesplash/tuning.json (an absolute XDG_CACHE_HOME only, as
// the XDG spec says), else $HOME/.cache/tilesplash/tuning.json.
std::filesystem::path default_cache_path();

// Prints "tilesplash: warning: <message>" once per process per message.
void warn_once(const std::string& message);

class JsonCache {
 public:
  // Throws std::invalid_argument when path is empty.
  explicit JsonCache(std::filesystem::path path);

  const std::filesystem::path& path() const { return path_; }
  // The entry under `key`; nullopt when there is none or the file cannot be
  // trusted (warned once).
  std::optional<nlohmann::json> entry(const std::string& key) const;
  // Adds or replaces the entry. Throws std::runtime_error naming the path when
  // the file cannot be written.
  void put(const std::string& key, nlohmann::json value) const;
  // Creates the directory and proves a file can be written there; throws
  // std::invalid_argument naming the path otherwise.
  void check_writable() const;

 private:
  std::filesystem::path path_;
};

}  // namespace tilesplash::io
