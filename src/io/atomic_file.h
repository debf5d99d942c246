// All-or-nothing file output: bytes go to "<path>.tmp.XXXXXX" in the target's
// directory (so the final rename never crosses file systems) and replace the
// target only in commit(). Destroying an uncommitted AtomicFile, which is what
// any exception on the way does, removes the temporary file, so a failed write
// leaves neither a partial target nor litter beside it; nor does SIGINT or
// SIGTERM once remove_temporaries_on_signals() (output_set.h) is installed.
//
// A path that is a symbolic link is written through it: the temporary goes
// beside the link's final target and replaces that, so the link (e.g. a tuning
// cache shared through links) stays a link and its target gets the bytes.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace tilesplash::io {

// The file a write to `path` lands in: `path` itself, or, when it is a
// symbolic link, the end of its chain of links (which need not exist yet).
// Throws std::runtime_error naming the path for a loop of links.
std::string link_target(const std::string& path);

class AtomicFile {
 public:
  // Throws std::runtime_error("<path>: ...") if the temporary file cannot be
  // created. `path` is resolved once, here, by link_target().
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(std::span<const std::byte> bytes);
  void write(std::string_view text);
  // Flushes, closes and renames over the target.
  void commit();

 private:
  [[noreturn]] void fail_errno(const std::string& what) const;

  std::string path_;  // link_target() of the path given
  std::string temp_path_;
  int fd_ = -1;
  int slot_ = -1;  // in temp_registry.h, so a signal can remove the temporary
  bool committed_ = false;
};

}  // namespace tilesplash::io
