#include "tenax/core/unique_fd.h"

#include <unistd.h>

#include <cerrno>
#include <utility>

namespace tenax {

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) reset(other.release());
  return *this;
}

int UniqueFd::release() noexcept { return std::exchange(fd_, -1); }

void UniqueFd::reset(int fd) noexcept {
  const int old = std::exchange(fd_, fd < 0 ? -1 : fd);
  if (old < 0 || old == fd_) return;
  // errno kept: callers often read it after an earlier call failed and before this one ran
  // (a destructor at the end of the scope).
  const int saved_errno = errno;
  ::close(old);
  errno = saved_errno;
}

std::error_code UniqueFd::close() noexcept {
  const int fd = std::exchange(fd_, -1);
  if (fd < 0 || ::close(fd) == 0) return {};
  return {errno, std::system_category()};
}

}  // namespace tenax
