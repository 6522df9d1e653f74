// A file descriptor opened for appending whole records, each with one write loop and no user
// buffer, so that a record is in the kernel (visible to readers, kept if the process dies) when
// `append` returns. Move-only; closes on destruction. Private to the SDK.
// Thread-safety: not shareable between threads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>

#include "tenax/core/unique_fd.h"

namespace tenax::sdk::detail {

class AppendOnlyFile {
 public:
  /// Opens `path` for appending, creating it if missing (mode 0644). Throws StorageError naming
  /// the path and the errno text.
  static AppendOnlyFile open_append(const std::filesystem::path& path);
  /// Creates `path`, which must not exist (O_EXCL): nullopt when it does. Throws StorageError
  /// naming the path for any other failure.
  static std::optional<AppendOnlyFile> create_new(const std::filesystem::path& path);

  AppendOnlyFile(AppendOnlyFile&& other) noexcept = default;
  AppendOnlyFile& operator=(AppendOnlyFile&& other) noexcept = default;
  AppendOnlyFile(const AppendOnlyFile&) = delete;
  AppendOnlyFile& operator=(const AppendOnlyFile&) = delete;
  ~AppendOnlyFile() = default;

  const std::filesystem::path& path() const { return path_; }
  /// True when the file was not empty when opened and its last byte was not '\n' (a record cut
  /// short by a crash).
  bool ended_mid_line_at_open() const { return ended_mid_line_; }
  /// Writes all of `bytes` at the end of the file. Throws StorageError naming the path.
  void append(std::string_view bytes);

 private:
  AppendOnlyFile(UniqueFd fd, std::filesystem::path path);
  UniqueFd fd_;
  std::filesystem::path path_;
  bool ended_mid_line_ = false;
};

/// Creates `dir` and its parents; `purpose` says what it is for in the message. Throws
/// StorageError naming the directory and the reason.
void create_directories_or_throw(const std::filesystem::path& dir, std::string_view purpose);

}  // namespace tenax::sdk::detail
