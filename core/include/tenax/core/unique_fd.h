// One owner for one POSIX file descriptor (a file, a socket, a pipe end, an eventfd, an inotify
// instance): the descriptor is closed exactly once, by close() — which reports failure — or by
// the destructor, which cannot report and ignores it. Move-only, like std::unique_ptr; the same
// shape as fmt's `file` and absl's `FileDescriptor` owners. Every Tenax component holds its
// descriptors through this type; nothing else calls ::close.
//
// Thread-safety: a UniqueFd belongs to one thread at a time (it is a value); concurrent get()
// calls are safe, moving or closing it while another thread uses the descriptor is not.
//
//   tenax::UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
//   if (!fd) throw StorageError(fmt::format("cannot create {}: {}", path.string(), std::strerror(errno)));
//   ... ::write(fd.get(), data, size) ...
//   if (const std::error_code ec = fd.close()) throw StorageError("close failed: " + ec.message());
#pragma once

#include <system_error>

namespace tenax {

class UniqueFd {
 public:
  /// Holds nothing (get() is -1).
  UniqueFd() noexcept = default;
  /// Takes ownership of `fd`; a negative value (a failed open) holds nothing.
  explicit UniqueFd(int fd) noexcept : fd_(fd < 0 ? -1 : fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  /// Closes the descriptor held, ignoring failure; never throws, never changes errno.
  ~UniqueFd() { reset(); }

  /// The descriptor, still owned; -1 when none is held.
  int get() const noexcept { return fd_; }
  /// Whether a descriptor is held.
  bool valid() const noexcept { return fd_ >= 0; }
  explicit operator bool() const noexcept { return valid(); }

  /// Gives up ownership without closing; returns the descriptor (-1 when none was held).
  [[nodiscard]] int release() noexcept;
  /// Closes the descriptor held (failure ignored, errno unchanged), then owns `fd`.
  void reset(int fd = -1) noexcept;
  /// Closes the descriptor now; the error close(2) reported, or an empty error_code. Holds
  /// nothing afterwards, even on failure (Linux releases the descriptor whatever close returns,
  /// EINTR included, so it is never retried). Closing an empty UniqueFd succeeds.
  [[nodiscard]] std::error_code close() noexcept;

 private:
  int fd_ = -1;
};

}  // namespace tenax
