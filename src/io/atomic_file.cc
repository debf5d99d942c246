// POSIX implementation of AtomicFile. The temporary name is opened with
// O_CREAT | O_EXCL and mode 0666 rather than through mkstemp, so the finished
// file gets the permissions the umask gives any new file instead of 0600.
#include "io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>

#include "io/temp_registry.h"
#include "tilesplash/tensor_io.h"

namespace tilesplash::io {
namespace {

std::string random_suffix() {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 engine{std::random_device{}()};
  std::string suffix(6, 'x');
  for (char& c : suffix) c = kAlphabet[engine() % (sizeof kAlphabet - 1)];
  return suffix;
}

}  // namespace

std::string link_target(const std::string& path) {
  namespace fs = std::filesystem;
  // As the kernel: more than 40 links in a chain is a loop (ELOOP).
  constexpr int kMaxLinks = 40;
  fs::path at = path;
  for (int links = 0; links <= kMaxLinks; ++links) {
    std::error_code error;
    if (!fs::is_symlink(fs::symlink_status(at, error))) return at.string();
    const fs::path next = fs::read_symlink(at, error);
    if (error) return at.string();  // gone meanwhile: written as a plain path
    at = next.is_absolute() ? next : at.parent_path() / next;
  }
  throw std::runtime_error(quoted_name(path) +
                           ": too many levels of symbolic links; expected a file or a link to one");
}

AtomicFile::AtomicFile(std::string path) : path_(link_target(path)) {
  for (int attempt = 0; attempt < 100 && fd_ < 0; ++attempt) {
    temp_path_ = path_ + ".tmp." + random_suffix();
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0 && errno != EEXIST) {
      const int error = errno;
      temp_path_.clear();
      throw std::runtime_error(quoted_name(path_) + ": cannot create a temporary file beside it: " +
                               std::strerror(error));
    }
  }
  if (fd_ < 0) {
    temp_path_.clear();
    throw std::runtime_error(quoted_name(path_) + ": cannot find a free temporary file name");
  }
  slot_ = register_temporary(temp_path_);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !temp_path_.empty()) ::unlink(temp_path_.c_str());
  unregister_temporary(slot_);
}

void AtomicFile::fail_errno(const std::string& what) const {
  throw std::runtime_error(quoted_name(path_) + ": " + what + ": " + std::strerror(errno));
}

void AtomicFile::write(std::span<const std::byte> bytes) {
  const std::byte* next = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    const ::ssize_t written = ::write(fd_, next, left);
    if (written < 0) {
      if (errno == EINTR) continue;
      fail_errno("write failed");
    }
    next += written;
    left -= static_cast<std::size_t>(written);
  }
}

void AtomicFile::write(std::string_view text) {
  write(std::as_bytes(std::span(text.data(), text.size())));
}

void AtomicFile::commit() {
  // fsync before rename: otherwise a crash can leave the new name pointing at
  // an empty file on some file systems.
  if (::fsync(fd_) != 0) fail_errno("fsync failed");
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail_errno("close failed");
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) fail_errno("cannot rename into place");
  committed_ = true;
  unregister_temporary(slot_);
  slot_ = -1;
}

}  // namespace tilesplash::io
