// Output safety for programs that read some files and write others (the CLI,
// a Python binding): no output may destroy an input or another output, every
// destination is checked before any work starts, and several outputs are
// written together or not at all.
//
// The rule: an output that is the same file as an input or as another output
// is refused — compared by device and inode where the file exists, by its
// absolute, normalised path where it does not. That includes a safetensors
// file read for Q/K/V and named again for the output: the output would not
// keep the other tensors, so it is refused rather than rewritten.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tilesplash/tensor_io.h"

namespace tilesplash {

class OutputSet {
 public:
  OutputSet();
  // Uncommitted staged files are removed: an exception on the way leaves
  // every target as it was.
  ~OutputSet();
  OutputSet(const OutputSet&) = delete;
  OutputSet& operator=(const OutputSet&) = delete;

  // A file the program reads; `option` names it in messages (e.g. "--q").
  void add_input(const std::string& path, const std::string& option);
  // Declares an output and checks it now. Throws InputError
  // "<option>: <problem>; expected ..." when the path is empty, an existing
  // directory or other non-regular file, the same file as an input or an
  // earlier output, or when its directory is missing, not a directory or does
  // not let a file be created (tried for real, so read-only mounts count).
  void add_output(const std::string& path, const std::string& option);

  // Write a declared output's content to a temporary file beside it; nothing
  // is visible at the path until commit(). Throws std::runtime_error when the
  // file system refuses (e.g. disk full) and std::invalid_argument for a path
  // that was not declared or a tensor whose data disagree with its shape.
  void stage(const std::string& path, std::string_view bytes);
  void stage_npy(const std::string& path, const Tensor& tensor);
  void stage_safetensors(const std::string& path,
                         const std::vector<std::pair<std::string, Tensor>>& tensors);

  // Renames every staged file over its target, in declaration order. All
  // writing happened in stage(), and the directories were checked, so a
  // rename fails only if the file system changed underneath.
  void commit();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One file written atomically (temporary beside it, then rename): a report,
// a picture, a cache.
void write_file_atomically(const std::string& path, std::string_view bytes);

// The file behind a tensor spec ("a.safetensors:q" -> "a.safetensors").
std::string tensor_spec_file(const std::string& spec);

// Installs SIGINT, SIGTERM and SIGHUP handlers (once; ignored signals stay
// ignored) that remove the temporary files of unfinished atomic writes and
// then let the signal take its usual course, chaining to a previous handler.
// For programs: a library never installs handlers on its own.
void remove_temporaries_on_signals();

}  // namespace tilesplash
