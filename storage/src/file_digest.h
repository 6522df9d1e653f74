// Private: size and XXH3-64 of a whole file, streamed. Thread-safety: stateless.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>

namespace tenax::storage::detail {

struct FileDigest {
  std::uint64_t bytes = 0;     ///< bytes read (the file size)
  std::uint64_t checksum = 0;  ///< XXH3-64 of those bytes
};

/// Reads up to `capacity` bytes of `path` into `buffer`, hashing as it goes. bytes is the
/// number read, or capacity + 1 when the file holds more. Throws StorageError on an I/O error.
FileDigest read_file_into(const std::filesystem::path& path, void* buffer, std::size_t capacity);

}  // namespace tenax::storage::detail
