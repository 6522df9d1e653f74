// The torch-free tensor vocabulary of storage/: element types, borrowed views for writing
// and owned buffers for reading. Thread-safety: plain values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tenax::storage {

// kFloat64 last: the values are not stored, but appending keeps every switch honest.
enum class DType : std::uint8_t { kFloat32, kFloat16, kBFloat16, kInt64, kUInt8, kFloat64 };

/// "float32", "float16", "bfloat16", "int64", "uint8", "float64" (the manifest and HDF5 attribute spelling).
const char* dtype_name(DType dtype);
/// Inverse of dtype_name; nullopt for anything else.
std::optional<DType> dtype_from_name(const std::string& name);
/// Bytes per element.
std::size_t dtype_size(DType dtype);

/// A borrowed, contiguous, little-endian tensor to be written. `data` must outlive the write.
struct TensorRef {
  std::string name;  ///< "model/bert.encoder.layer.0.attention.self.query.weight"
  DType dtype = DType::kFloat32;
  std::vector<std::int64_t> shape;
  const void* data = nullptr;
  std::size_t nbytes = 0;  ///< must equal product(shape) * dtype_size(dtype)
};

/// An owned tensor read back from a checkpoint, already verified against its checksum.
struct TensorData {
  DType dtype = DType::kFloat32;
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> bytes;
};

}  // namespace tenax::storage
