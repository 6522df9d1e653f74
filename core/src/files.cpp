#include "tenax/core/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>

#include "tenax/core/error.h"
#include "tenax/core/unique_fd.h"

namespace tenax::files {
namespace {

[[noreturn]] void fail(const std::string& what, const std::filesystem::path& path, int err) {
  throw StorageError(what + " " + path.string() + ": " + std::strerror(err));
}

void fsync_path(const std::filesystem::path& path, int flags) {
  UniqueFd fd(::open(path.c_str(), flags | O_CLOEXEC));
  if (!fd) fail("cannot open for fsync", path, errno);
  if (::fsync(fd.get()) != 0) fail("fsync failed for", path, errno);
  if (const std::error_code ec = fd.close()) fail("close failed for", path, ec.value());
}

}  // namespace

void fsync_file(const std::filesystem::path& path) { fsync_path(path, O_RDONLY); }

void fsync_dir(const std::filesystem::path& dir) { fsync_path(dir, O_RDONLY | O_DIRECTORY); }

void write_durably(const std::filesystem::path& path, const void* data, std::size_t size) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd) fail("cannot create", path, errno);
  // On any failure the partial file goes: it holds nothing usable, and on a full disk the
  // space is what the next attempt needs.
  auto give_up = [&](const char* what, int err) {
    fd.reset();
    ::unlink(path.c_str());
    fail(what, path, err);
  };
  const char* p = static_cast<const char*>(data);
  std::size_t left = size;
  while (left > 0) {
    // Writes are capped at 1 GiB: Linux transfers at most 0x7ffff000 bytes per call anyway.
    const ssize_t n = ::write(fd.get(), p, std::min<std::size_t>(left, std::size_t{1} << 30));
    if (n < 0) {
      if (errno == EINTR) continue;
      give_up("write failed for", errno);
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  if (::fsync(fd.get()) != 0) give_up("fsync failed for", errno);
  if (const std::error_code ec = fd.close()) give_up("close failed for", ec.value());
}

void atomic_write(const std::filesystem::path& path, const std::string& contents) {
  const std::filesystem::path tmp = path.string() + ".tmp." + std::to_string(::getpid());
  write_durably(tmp, contents.data(), contents.size());
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
    throw StorageError("cannot rename " + from.string() + " to " + to.string() + ": " + std::strerror(errno));
  }
  fsync_dir(to.has_parent_path() ? to.parent_path() : std::filesystem::path("."));
}

}  // namespace tenax::files
