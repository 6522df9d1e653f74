// Reads and verifies one committed checkpoint (a step directory). Every byte is treated as
// untrusted: corruption anywhere (manifest, HDF5 metadata, tensor data, truncation, a missing
// shard) is reported as a non-OK Status, never a crash, so the caller can fall back to the
// previous checkpoint.
//
// Two ways to a tensor's bytes:
//  - direct (the manifest records the tensor's offset in its shard, as every checkpoint of
//    this build does): the bytes are read at that offset straight into the destination and
//    must match the tensor's XXH3 in the manifest. No HDF5 parsing, no intermediate copy: a
//    load costs about what reading the file costs.
//  - through HDF5 (older manifests without offsets, and verify_all()): the whole shard is read
//    into memory once and checked against the manifest's size and XXH3, so a corrupted file
//    never reaches HDF5's parser; HDF5 parses that verified image, never the file, and each
//    tensor is checked against its index entry (dtype, shape, bytes, offset, XXH3). Each shard
//    read this way stays in memory until the reader is destroyed.
//
// Thread-safety: all const members may be called concurrently (an internal mutex guards the
// cache of open shards; HDF5 serialises anyway). Not collective: each rank opens its own.
//
//   auto reader = CheckpointReader::open(dir.step_dir(*dir.latest_step()));
//   if (!reader.is_ok()) { /* fall back */ }
//   auto w = reader.value().read("model/encoder.weight");   // StatusOr<TensorData>
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tenax/core/status.h"
#include "tenax/storage/manifest.h"
#include "tenax/storage/tensor_bytes.h"

namespace tenax::storage {

/// One tensor to read, and where its bytes go (nbytes must be the manifest's size).
struct ReadTarget {
  std::string name;
  void* destination = nullptr;
  std::size_t nbytes = 0;
};

class CheckpointReader {
 public:
  /// Parses and validates step_dir/manifest.json and checks that every listed shard exists
  /// with its recorded size. kNotFound without a manifest; kDataLoss for any corruption.
  [[nodiscard]] static StatusOr<CheckpointReader> open(const std::filesystem::path& step_dir);

  CheckpointReader(CheckpointReader&&) noexcept;
  CheckpointReader& operator=(CheckpointReader&&) noexcept;
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;
  ~CheckpointReader();

  /// The validated manifest.
  const Manifest& manifest() const { return manifest_; }
  /// The step directory this reader was opened on.
  const std::filesystem::path& step_dir() const { return step_dir_; }
  /// Whether the index lists `name`.
  bool contains(const std::string& name) const;
  /// Reads one tensor and verifies it. kNotFound for an unknown name; kDataLoss naming the
  /// file and tensor for any mismatch or unreadable data.
  [[nodiscard]] StatusOr<TensorData> read(const std::string& name) const;
  /// The same, straight into `destination` (`nbytes` must be the manifest's size for the
  /// tensor: kInvalidArgument otherwise). On kDataLoss the destination holds garbage.
  [[nodiscard]] Status read_into(const std::string& name, void* destination, std::size_t nbytes) const;
  /// Reads every target, verified: what a resume calls. Each shard whose tensors all have
  /// offsets is read front to back once: the targets' bytes go straight into their
  /// destinations, the rest (HDF5's bookkeeping, tensors not asked for) through a small
  /// buffer, and the whole file's XXH3 is checked, so a fault anywhere in the shard fails
  /// the load (with the manifest's own checksum, that also vouches for each tensor). Other shards are read tensor by
  /// tensor as read_into does. First fault wins; on an error the destinations hold garbage.
  [[nodiscard]] Status read_all_into(const std::vector<ReadTarget>& targets) const;
  /// Whole-file checksum of every shard, then every tensor read through HDF5 and verified
  /// (dtype, shape, offset, checksum). First fault wins.
  [[nodiscard]] Status verify_all() const;

 private:
  struct State;
  CheckpointReader(std::filesystem::path step_dir, Manifest manifest);
  Status read_direct(const IndexEntry& entry, void* destination) const;
  Status stream_shard(const ShardSummary& shard, const std::map<std::string, const ReadTarget*>& wanted) const;
  Status read_via_hdf5(const IndexEntry& entry, void* destination) const;

  std::filesystem::path step_dir_;
  Manifest manifest_;
  std::unique_ptr<State> state_;
};

}  // namespace tenax::storage
