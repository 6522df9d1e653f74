#include "tenax/storage/tensor_bytes.h"

namespace tenax::storage {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kInt64: return "int64";
    case DType::kUInt8: return "uint8";
    case DType::kFloat64: return "float64";
  }
  return "unknown";
}

std::optional<DType> dtype_from_name(const std::string& name) {
  for (DType d : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kInt64, DType::kUInt8, DType::kFloat64}) {
    if (name == dtype_name(d)) return d;
  }
  return std::nullopt;
}

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return 4;
    case DType::kFloat16: return 2;
    case DType::kBFloat16: return 2;
    case DType::kInt64: return 8;
    case DType::kUInt8: return 1;
    case DType::kFloat64: return 8;
  }
  return 0;
}

}  // namespace tenax::storage
