// Private: writes the tensors' bytes of a shard whose HDF5 layout is already on disk, and
// digests the whole file as it goes. Thread-safety: stateless.
//
// Why not H5Dwrite: HDF5's sec2 driver writes through the page cache, and the kernel's copy into
// it is the writer's largest use of CPU (more than hashing the same bytes); with training on
// every core, that CPU is taken from the training threads. O_DIRECT writes from an aligned
// buffer cost almost none, and leave no dirty pages for the fsync to wait on. Each
// tensor goes out in file order through a small aligned buffer, hashed while it is in the CPU's
// cache, so the whole-file checksum needs no pass of its own.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "file_digest.h"

namespace tenax::storage::detail {

/// `nbytes` of `data` that belong at `offset` in the file.
struct Region {
  std::uint64_t offset = 0;
  const void* data = nullptr;
  std::uint64_t nbytes = 0;
};

/// Writes every region at its offset into `path` (an existing file of exactly `file_size` bytes:
/// HDF5 wrote its metadata and allocated the regions' space), then returns the size and XXH3-64
/// of the whole file: the bytes between regions read back, the regions' bytes as written.
/// Aligned whole blocks go out with O_DIRECT where the file system takes it; the rest (a
/// region's last partial block, a file system without O_DIRECT) through the page cache. Does
/// not fsync. Throws StorageError naming the file for an I/O error, a file of another size, or
/// regions that overlap or lie outside the file.
FileDigest write_regions(const std::filesystem::path& path, std::uint64_t file_size, std::vector<Region> regions);

/// The alignment of the regions that write_regions can send with O_DIRECT (HDF5 is asked to
/// align every large dataset to it).
inline constexpr std::uint64_t kDirectIoAlignment = 4096;

}  // namespace tenax::storage::detail
