// Private: size and XXH3-64 of a whole file, streamed. Thread-safety: stateless.
#pragma once

#include <cstdint>
#include <filesystem>

namespace tenax::storage::detail {

struct FileDigest {
  std::uint64_t bytes = 0;     ///< bytes read (the file size)
  std::uint64_t checksum = 0;  ///< XXH3-64 of those bytes
};

/// Reads `path` to the end. Throws StorageError naming the path on an I/O error.
FileDigest digest_file(const std::filesystem::path& path);

}  // namespace tenax::storage::detail
