// Hugging Face safetensors files (https://github.com/huggingface/safetensors): the format of
// `model.safetensors` in a Hugging Face model directory. Torch-free.
//
//   [8 bytes: N, little-endian u64] [N bytes: JSON header, space-padded] [data region]
//   header = {"__metadata__": {"format": "pt"},                     (optional, str → str)
//             "<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
//   offsets are relative to the data region, which the tensors cover exactly, without gaps.
//
// The writer produces the same bytes as the Python `safetensors` package (Rust crate) for the
// same tensors and at most one metadata entry (the crate orders a larger metadata map by hash,
// i.e. unpredictably): tensors by element size, largest first (so each is aligned to its element
// size), then by name; header padded with spaces to a multiple of 8.
//
// The reader treats the file as untrusted: header length against the file size and a 100 MB
// cap, JSON syntax and nesting, field types, dtypes, shape products that overflow, offsets
// out of range, overlapping, leaving gaps or disagreeing with dtype × shape. Every such fault is
// kDataLoss naming the file (and the tensor); nothing crashes or throws on arbitrary bytes.
// Dtypes Tenax has no DType for (F64, I32, BOOL, ...) are kFailedPrecondition: the file may be
// fine, Tenax just cannot hold those tensors.
//
// Thread-safety: the free functions are stateless; a SafetensorsFile is immutable after
// construction, so its const members may be called concurrently. Nothing is collective.
//
//   Status s = write_safetensors(dir / "model.safetensors", refs, {{"format", "pt"}});
//   auto file = read_safetensors(dir / "model.safetensors");       // StatusOr<SafetensorsFile>
//   if (!file.is_ok()) return file.status();
//   for (const SafetensorsEntry& e : file.value().tensors())       // sorted by name
//     load(e.name, e.dtype, e.shape, file.value().data(e), e.nbytes);
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tenax/core/status.h"
#include "tenax/storage/tensor_bytes.h"

namespace tenax::storage {

/// Largest JSON header the reader accepts (the Rust crate's limit).
inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

/// "F32", "F16", "BF16", "I64", "U8": the safetensors spelling of a DType.
const char* safetensors_dtype_name(DType dtype);

/// Writes `tensors` and `metadata` as a safetensors file at `path`, atomically: into a
/// temporary file beside it, fsync, rename over `path`, fsync of the directory. An empty
/// `metadata` leaves "__metadata__" out, as Python's `save(tensors)` does. Tensor data is
/// borrowed for the call. Errors (never thrown, except std::bad_alloc), naming file and tensor:
///   kInvalidArgument     nbytes vs dtype × shape, negative dimension, duplicate or reserved
///                        ("__metadata__") name, a name or metadata string not valid UTF-8;
///   kFailedPrecondition  I/O failure (no such directory, EACCES, ENOSPC, fsync failed).
/// On error the temporary file is removed and `path` keeps its old contents (unless only the
/// final fsync of the directory failed, after the rename).
[[nodiscard]] Status write_safetensors(const std::filesystem::path& path, const std::vector<TensorRef>& tensors,
                                       const std::map<std::string, std::string>& metadata = {});

/// One tensor as the header describes it; its bytes are SafetensorsFile::data(entry).
struct SafetensorsEntry {
  std::string name;                 ///< e.g. "bert.embeddings.word_embeddings.weight"
  DType dtype = DType::kFloat32;    ///< element type
  std::vector<std::int64_t> shape;  ///< [] for a scalar
  std::uint64_t begin = 0;          ///< offset of the first byte inside the data region
  std::uint64_t nbytes = 0;         ///< product(shape) * dtype_size(dtype)
};

/// A validated safetensors file, held in memory whole. Movable; tensor bytes stay valid for the
/// object's lifetime (and move with it).
class SafetensorsFile {
 public:
  /// Where the bytes came from (the path, or the `where` given to parse_safetensors).
  const std::string& source() const { return source_; }
  /// The "__metadata__" map (empty when absent).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  /// Every tensor, sorted by name.
  const std::vector<SafetensorsEntry>& tensors() const { return entries_; }
  /// The tensor called `name`, or nullptr.
  const SafetensorsEntry* find(const std::string& name) const;
  /// The entry's bytes (entry.nbytes of them, little-endian). `entry` must come from this file.
  const std::uint8_t* data(const SafetensorsEntry& entry) const;
  /// A borrowed view of one tensor (e.g. to write it elsewhere); valid while this object lives.
  TensorRef ref(const SafetensorsEntry& entry) const;
  /// An owned copy of one tensor; kNotFound for an unknown name.
  [[nodiscard]] StatusOr<TensorData> read(const std::string& name) const;

 private:
  friend StatusOr<SafetensorsFile> parse_safetensors(std::vector<std::uint8_t>, std::string);
  SafetensorsFile() = default;

  std::string source_;
  std::vector<std::uint8_t> bytes_;  ///< the whole file
  std::uint64_t data_start_ = 0;     ///< 8 + header length
  std::map<std::string, std::string> metadata_;
  std::vector<SafetensorsEntry> entries_;
};

/// Reads and validates the file at `path` (all of it, into memory). kNotFound when it does not
/// exist; kDataLoss for unreadable or malformed bytes; kFailedPrecondition for a dtype Tenax
/// does not support.
[[nodiscard]] StatusOr<SafetensorsFile> read_safetensors(const std::filesystem::path& path);

/// Validates safetensors bytes already in memory; `where` starts every error message.
[[nodiscard]] StatusOr<SafetensorsFile> parse_safetensors(std::vector<std::uint8_t> bytes, std::string where);

}  // namespace tenax::storage
