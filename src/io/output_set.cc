// OutputSet (output_set.h): same-file checks by device and inode, destination
// checks by really creating (and removing) a temporary file, and staged
// AtomicFiles renamed together at the end.
#include "tilesplash/output_set.h"

#include <sys/stat.h>

#include <filesystem>
#include <optional>
#include <stdexcept>

#include "io/atomic_file.h"
#include "io/io_common.h"

namespace tilesplash {
namespace {

struct FileKey {
  std::string normal;  // absolute, lexically normalised, symlinks resolved where they exist
  std::optional<std::pair<dev_t, ino_t>> id;

  bool same_file(const FileKey& other) const {
    if (id && other.id) return *id == *other.id;
    return normal == other.normal;
  }
};

FileKey key_of(const std::string& path) {
  FileKey key;
  std::error_code error;
  std::filesystem::path normal = std::filesystem::weakly_canonical(path, error);
  if (error) normal = std::filesystem::absolute(path, error).lexically_normal();
  key.normal = normal.string();
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0) key.id = std::pair{info.st_dev, info.st_ino};
  return key;
}

struct Entry {
  std::string path;
  std::string option;
  FileKey key;
  bool output = false;
  std::unique_ptr<io::AtomicFile> staged;
};

[[noreturn]] void refuse(const std::string& option, const std::string& problem) {
  throw InputError(option + ": " + problem);
}

std::string quoted(const std::string& path) { return quoted_name(path); }

void check_destination(const std::string& path, const std::string& option) {
  if (path.empty()) refuse(option, "empty path; expected a file path");
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0) {
    if (S_ISDIR(info.st_mode)) {
      refuse(option, quoted(path) + " is a directory; expected a file path");
    }
    if (!S_ISREG(info.st_mode)) {
      refuse(option, quoted(path) + " is not a regular file; expected a new or regular file");
    }
  }
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string dir = parent.empty() ? "." : parent.string();
  if (::stat(dir.c_str(), &info) != 0) {
    refuse(option, "directory " + quoted(dir) + " does not exist; expected an existing directory");
  }
  if (!S_ISDIR(info.st_mode)) {
    refuse(option, quoted(dir) + " is not a directory; expected an existing directory");
  }
  try {
    io::AtomicFile probe(path);  // created and removed: proves a write can succeed
  } catch (const std::runtime_error& e) {
    refuse(option, "cannot create a file in " + quoted(dir) + " (" + e.what() +
                       "); expected a writable directory");
  }
}

}  // namespace

struct OutputSet::Impl {
  std::vector<Entry> entries;

  Entry& declared(const std::string& path) {
    for (Entry& entry : entries) {
      if (entry.output && entry.path == path) return entry;
    }
    throw std::invalid_argument("OutputSet: " + quoted(path) + " was not declared with add_output");
  }
};

OutputSet::OutputSet() : impl_(std::make_unique<Impl>()) {}
OutputSet::~OutputSet() = default;

void OutputSet::add_input(const std::string& path, const std::string& option) {
  impl_->entries.push_back({path, option, key_of(path), false, nullptr});
}

void OutputSet::add_output(const std::string& path, const std::string& option) {
  check_destination(path, option);
  FileKey key = key_of(path);
  for (const Entry& entry : impl_->entries) {
    if (!entry.key.same_file(key)) continue;
    refuse(option, quoted(path) + " is the same file as " +
                       (entry.output ? "the output " : "the input ") + entry.option + " (" +
                       quoted(entry.path) + "); expected a path no other option names");
  }
  impl_->entries.push_back({path, option, std::move(key), true, nullptr});
}

void OutputSet::stage(const std::string& path, std::string_view bytes) {
  Entry& entry = impl_->declared(path);
  auto file = std::make_unique<io::AtomicFile>(path);
  file->write(bytes);
  entry.staged = std::move(file);
}

void OutputSet::stage_npy(const std::string& path, const Tensor& tensor) {
  Entry& entry = impl_->declared(path);
  io::check_tensor_for_write(path, tensor);
  auto file = std::make_unique<io::AtomicFile>(path);
  file->write(io::npy_header(tensor));
  file->write(tensor.data);
  entry.staged = std::move(file);
}

void OutputSet::stage_safetensors(const std::string& path,
                                  const std::vector<std::pair<std::string, Tensor>>& tensors) {
  Entry& entry = impl_->declared(path);
  const std::string header = io::safetensors_header(path, tensors);
  auto file = std::make_unique<io::AtomicFile>(path);
  file->write(header);
  for (const auto& [name, tensor] : tensors) file->write(tensor.data);
  entry.staged = std::move(file);
}

void OutputSet::commit() {
  for (Entry& entry : impl_->entries) {
    if (entry.staged) entry.staged->commit();
  }
  for (Entry& entry : impl_->entries) entry.staged.reset();
}

void write_file_atomically(const std::string& path, std::string_view bytes) {
  io::AtomicFile file(path);
  file.write(bytes);
  file.commit();
}

}  // namespace tilesplash
