#include "tensor_conversion.h"

#include <cstring>

#include <torch/torch.h>

#include "tenax/core/error.h"

namespace tenax::sdk {

storage::DType to_storage_dtype(torch::ScalarType type) {
  switch (type) {
    case torch::kFloat32: return storage::DType::kFloat32;
    case torch::kFloat16: return storage::DType::kFloat16;
    case torch::kBFloat16: return storage::DType::kBFloat16;
    case torch::kInt64: return storage::DType::kInt64;
    case torch::kUInt8: return storage::DType::kUInt8;
    case torch::kFloat64: return storage::DType::kFloat64;
    default:
      throw StorageError(std::string("tensor dtype ") + c10::toString(type) +
                         " cannot be checkpointed; supported: float32, float64, float16, bfloat16, int64, uint8");
  }
}

torch::ScalarType to_torch_dtype(storage::DType dtype) {
  switch (dtype) {
    case storage::DType::kFloat32: return torch::kFloat32;
    case storage::DType::kFloat16: return torch::kFloat16;
    case storage::DType::kBFloat16: return torch::kBFloat16;
    case storage::DType::kInt64: return torch::kInt64;
    case storage::DType::kUInt8: return torch::kUInt8;
    case storage::DType::kFloat64: return torch::kFloat64;
  }
  throw StorageError("unknown storage dtype");
}

torch::Tensor contiguous_cpu(const torch::Tensor& tensor) { return tensor.detach().to(torch::kCPU).contiguous(); }

storage::TensorRef make_ref(const std::string& name, const torch::Tensor& t) {
  storage::TensorRef ref;
  ref.name = name;
  ref.dtype = to_storage_dtype(t.scalar_type());
  ref.shape.assign(t.sizes().begin(), t.sizes().end());
  ref.data = t.data_ptr();
  ref.nbytes = static_cast<std::size_t>(t.numel()) * t.element_size();
  return ref;
}

torch::Tensor to_tensor(const storage::TensorData& data) {
  auto out = torch::empty(data.shape, torch::TensorOptions().dtype(to_torch_dtype(data.dtype)));
  const std::size_t expected = static_cast<std::size_t>(out.numel()) * out.element_size();
  if (expected != data.bytes.size()) {
    throw StorageError("tensor bytes do not match its shape: " + std::to_string(data.bytes.size()) + " bytes for " +
                       std::to_string(expected) + " expected");
  }
  if (expected > 0) std::memcpy(out.data_ptr(), data.bytes.data(), expected);
  return out;
}

}  // namespace tenax::sdk
