// Reads and verifies one committed checkpoint (a step directory). Every byte is treated as
// untrusted: corruption anywhere (manifest, HDF5 metadata, tensor data, truncation, a missing
// shard) is reported as a non-OK Status, never a crash, so the caller can fall back to the
// previous checkpoint.
//
// Before HDF5 parses a shard, the whole file is read into memory once and checked there
// against the manifest's size and XXH3 (once per shard and reader; verify_all() counts), so a
// corrupted file never reaches HDF5's parser, and HDF5 parses that verified image, never the
// file itself. Memory: each shard read stays in memory until the reader is destroyed. Each tensor is then checked against its index entry (dtype, shape, bytes, XXH3).
//
// Thread-safety: all const members may be called concurrently (an internal mutex guards the
// cache of open shards; HDF5 serialises anyway). Not collective: each rank opens its own.
//
//   auto reader = CheckpointReader::open(dir.step_dir(*dir.latest_step()));
//   if (!reader.is_ok()) { /* fall back */ }
//   auto w = reader.value().read("model/encoder.weight");   // StatusOr<TensorData>
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "tenax/core/status.h"
#include "tenax/storage/manifest.h"
#include "tenax/storage/tensor_bytes.h"

namespace tenax::storage {

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
  /// Whole-file checksum of every shard, then every tensor read and verified. First fault wins.
  [[nodiscard]] Status verify_all() const;

 private:
  struct State;
  CheckpointReader(std::filesystem::path step_dir, Manifest manifest);

  std::filesystem::path step_dir_;
  Manifest manifest_;
  std::unique_ptr<State> state_;
};

}  // namespace tenax::storage
