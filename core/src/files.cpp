#include "tenax/core/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "tenax/core/error.h"

namespace tenax::files {
namespace {

[[noreturn]] void fail(const std::string& what, const std::filesystem::path& path, int err) {
  throw StorageError(what + " " + path.string() + ": " + std::strerror(err));
}

void fsync_path(const std::filesystem::path& path, int flags) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) fail("cannot open for fsync", path, errno);
  if (::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    fail("fsync failed for", path, err);
  }
  if (::close(fd) != 0) fail("close failed for", path, errno);
}

}  // namespace

void fsync_file(const std::filesystem::path& path) { fsync_path(path, O_RDONLY); }

void fsync_dir(const std::filesystem::path& dir) { fsync_path(dir, O_RDONLY | O_DIRECTORY); }

void atomic_write(const std::filesystem::path& path, const std::string& contents) {
  const std::filesystem::path tmp = path.string() + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot create", tmp, errno);
  const char* p = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      fail("write failed for", tmp, err);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    fail("fsync failed for", tmp, err);
  }
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    fail("close failed for", tmp, err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    fail("cannot rename into place", path, err);
  }
  fsync_dir(path.has_parent_path() ? path.parent_path() : std::filesystem::path("."));
}

std::string read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw StorageError("cannot open " + path.string() + ": " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw StorageError("cannot read " + path.string());
  return ss.str();
}

void durable_rename(const std::filesystem::path& from, const std::filesystem::path& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    throw StorageError("cannot rename " + from.string() + " to " + to.string() + ": " +
                       std::strerror(errno));
  }
  fsync_dir(to.has_parent_path() ? to.parent_path() : std::filesystem::path("."));
}

}  // namespace tenax::files
