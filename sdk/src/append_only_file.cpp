#include "append_only_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>
#include <utility>

#include "tenax/core/error.h"

namespace tenax::sdk::detail {
namespace {

std::string errno_text(int err) { return std::system_category().message(err); }

}  // namespace

AppendOnlyFile::AppendOnlyFile(UniqueFd fd, std::filesystem::path path) : fd_(std::move(fd)), path_(std::move(path)) {
  const off_t size = ::lseek(fd_.get(), 0, SEEK_END);
  if (size > 0) {
    char last = '\n';
    if (::pread(fd_.get(), &last, 1, size - 1) == 1) ended_mid_line_ = last != '\n';
  }
}

AppendOnlyFile AppendOnlyFile::open_append(const std::filesystem::path& path) {
  // Read-write only so that the constructor can look at the last byte.
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!fd) {
    throw StorageError("cannot open " + path.string() + " for appending: " + errno_text(errno) +
                       " (check that the directory is writable, or choose another logging_dir)");
  }
  return AppendOnlyFile(std::move(fd), path);
}

std::optional<AppendOnlyFile> AppendOnlyFile::create_new(const std::filesystem::path& path) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644));
  if (!fd) {
    if (errno == EEXIST) return std::nullopt;
    throw StorageError("cannot create " + path.string() + ": " + errno_text(errno) +
                       " (check that the directory is writable, or choose another logging_dir)");
  }
  return AppendOnlyFile(std::move(fd), path);
}

void AppendOnlyFile::append(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd_.get(), bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throw StorageError("cannot append to " + path_.string() + ": " + errno_text(errno));
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

void create_directories_or_throw(const std::filesystem::path& dir, std::string_view purpose) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    throw StorageError("cannot create the " + std::string(purpose) + " directory " + dir.string() + ": " +
                       ec.message() + " (set logging_dir to a writable directory)");
  }
}

}  // namespace tenax::sdk::detail
