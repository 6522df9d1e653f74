// Durable file operations: fsync of files and directories, atomic replace-by-rename.
// Every call reports the failing path and errno text. Thread-safety: stateless.
//
//   tenax::files::atomic_write(dir / "latest", "step-000000500");  // tmp, fsync, rename, fsync dir
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

namespace tenax::files {

/// fsync()s a regular file. Throws StorageError.
void fsync_file(const std::filesystem::path& path);

/// fsync()s a directory so that renames and creations inside it are durable. Throws StorageError.
void fsync_dir(const std::filesystem::path& dir);

/// Creates or truncates `path`, writes `size` bytes, fsyncs and closes it. On any failure the
/// partial file is removed and StorageError names the path and errno text ("No space left on
/// device", "File too large", "Read-only file system", ...). The directory is not fsynced.
void write_durably(const std::filesystem::path& path, const void* data, std::size_t size);

/// Writes `contents` to a temporary file beside `path`, fsyncs it, renames it over `path` and
/// fsyncs the parent directory. Readers see the old or the new contents, never a mix.
void atomic_write(const std::filesystem::path& path, const std::string& contents);

/// Reads a whole file. Throws StorageError naming the path.
std::string read_all(const std::filesystem::path& path);

/// rename(2) + fsync of the destination's parent. Throws StorageError.
void durable_rename(const std::filesystem::path& from, const std::filesystem::path& to);

}  // namespace tenax::files
