// Test-only trace points. A process started with TENAX_TRACE_FILE=<path> appends one line per
// trace_point() call to that file:
//
//   <CLOCK_MONOTONIC nanoseconds> <pid> <event> <value>
//
// so that a test which SIGKILLs the process at some instant can tell afterwards what the
// process had done by then (tests/integration/async_save_crash_test.cpp aims its kills at the
// phases of a checkpoint save this way, and counts where they landed). Each line is a single
// write() on an O_APPEND descriptor: a line written before the kill is in the file after it
// (the kernel holds it, not a user-space buffer), and lines of threads or processes writing
// the same file never interleave. Without the variable (always, outside such tests) a call
// costs one load of an initialised static.
//
// Thread-safety: any thread.
//
//   trace_point("save.renamed", step);
#pragma once

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace tenax {
namespace detail {

/// The trace file's descriptor, opened on first use; -1 when tracing is off.
inline int trace_fd() {
  static const int fd = [] {
    const char* path = std::getenv("TENAX_TRACE_FILE");
    if (path == nullptr || *path == '\0') return -1;
    return ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  }();
  return fd;
}

}  // namespace detail

/// Appends "<monotonic ns> <pid> <event> <value>" to $TENAX_TRACE_FILE, if set. `event` has
/// no spaces. Never throws; a failed write is ignored (a trace is no reason to fail a save).
inline void trace_point(const char* event, std::int64_t value) {
  const int fd = detail::trace_fd();
  if (fd < 0) return;
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  char line[160];
  const int n = std::snprintf(line, sizeof line, "%lld %d %s %lld\n",
                              static_cast<long long>(now.tv_sec) * 1000000000LL + now.tv_nsec,
                              static_cast<int>(::getpid()), event, static_cast<long long>(value));
  if (n <= 0 || static_cast<std::size_t>(n) >= sizeof line) return;
  const ssize_t written = ::write(fd, line, static_cast<std::size_t>(n));
  (void)written;
}

}  // namespace tenax
