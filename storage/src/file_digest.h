// Private: size and XXH3-64 of a whole file, streamed. Thread-safety: stateless.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <vector>

namespace tenax::storage::detail {

struct FileDigest {
  std::uint64_t bytes = 0;     ///< bytes read (the file size)
  std::uint64_t checksum = 0;  ///< XXH3-64 of those bytes
};

/// Bytes of a file that are known without reading them: `nbytes` at `offset` equal `data`.
struct KnownRegion {
  std::uint64_t offset = 0;
  const void* data = nullptr;
  std::uint64_t nbytes = 0;
};

/// Size and XXH3-64 of the whole file `path`, which must be `file_size` bytes long, taking the
/// bytes of `regions` (sorted by offset, disjoint, inside the file) from memory and reading
/// only the rest: the digest of the whole file, without reading back what was just
/// written from memory. Throws StorageError for an I/O error, a file of another size, or
/// regions that are unsorted, overlap or lie outside the file.
FileDigest digest_file_with_regions(const std::filesystem::path& path, std::uint64_t file_size,
                                    const std::vector<KnownRegion>& regions);

/// Reads up to `capacity` bytes of `path` into `buffer`, hashing as it goes. bytes is the
/// number read, or capacity + 1 when the file holds more. Throws StorageError on an I/O error.
FileDigest read_file_into(const std::filesystem::path& path, void* buffer, std::size_t capacity);

}  // namespace tenax::storage::detail
