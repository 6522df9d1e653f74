// Writes one rank's share of a checkpoint into one HDF5 file (a "shard"), and describes what
// was written so that rank 0 can build the manifest.
//
// Inside a shard every tensor is one contiguous dataset at its name ("model/encoder.w" →
// group /model, dataset "encoder.w") with attributes "dtype" (string), "shape" (int64 array)
// and "xxh3" (16 hex digits of the tensor bytes), so h5py/h5dump can read it without Tenax.
//
// Thread-safety: write_shard may be called from any thread; HDF5 (thread-safe build)
// serialises the calls process-wide, so one writer thread per rank is enough.
// Nothing here is collective.
//
//   auto info = tenax::storage::write_shard(tmp / shard_file_name(rank, world), my_tensors);
//   if (!info.is_ok()) return info.status();
//   std::string wire = to_json(info.value()).dump();   // send to rank 0
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tenax/core/status.h"
#include "tenax/storage/tensor_bytes.h"

namespace tenax::storage {

/// Where one tensor lives and what it must look like; one entry of the manifest's index.
struct IndexEntry {
  std::string name;                 ///< tensor name, also its HDF5 path inside the shard
  std::string shard;                ///< shard file name (no directory)
  DType dtype = DType::kFloat32;    ///< element type
  std::vector<std::int64_t> shape;  ///< [] for a scalar
  std::uint64_t checksum = 0;       ///< XXH3-64 of the tensor bytes
  std::uint64_t nbytes = 0;         ///< product(shape) * dtype_size(dtype)
  /// Where the contiguous data starts in the shard file (HDF5's H5Dget_offset). Lets a load
  /// read the bytes straight into their destination without parsing HDF5. Absent for an
  /// empty tensor, and in manifests of builds that did not record it (the reader then
  /// parses the HDF5 file).
  std::optional<std::uint64_t> offset;
};

/// What write_shard produced: the file's identity and the tensors in it.
struct ShardInfo {
  std::string file;                 ///< file name only, e.g. "shard-00001-of-00004.h5"
  std::uint64_t bytes = 0;          ///< file size after close
  std::uint64_t checksum = 0;       ///< XXH3-64 of the whole file, read back after close+fsync
  std::vector<IndexEntry> tensors;  ///< in the order they were written
};

/// Writes `tensors` into a new HDF5 file at `file` (truncating any old one), flushes and closes
/// it, fsyncs it and reads it back for the whole-file checksum. Tensor data is borrowed for the
/// call. A disk fault (ENOSPC, EFBIG, EROFS, EIO) is reported with its errno text and leaves no
/// HDF5 state and no open descriptor behind.
/// Errors (never thrown, except std::bad_alloc), each naming the file and tensor:
///   kFailedPrecondition  invalid tensor (nbytes vs shape, bad or duplicate name) or an I/O
///                        failure (no such directory, EACCES, ENOSPC, fsync failed);
///   kInternal            HDF5 refused something it should accept.
/// On error the partial file is removed.
[[nodiscard]] StatusOr<ShardInfo> write_shard(const std::filesystem::path& file, const std::vector<TensorRef>& tensors);

/// ShardInfo as JSON (checksums as 16-hex strings), to send from a rank to rank 0.
nlohmann::json to_json(const ShardInfo& info);
/// Strict inverse of to_json: any missing or ill-typed field → kDataLoss naming the key.
[[nodiscard]] StatusOr<ShardInfo> shard_info_from_json(const nlohmann::json& json);

}  // namespace tenax::storage
