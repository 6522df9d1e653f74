// Conversion between torch tensors and the torch-free tensor vocabulary of storage/.
// Thread-safety: stateless.
//
// Private to the SDK (under sdk/src: not installed).
#pragma once

#include <string>

#include <torch/types.h>

#include "tenax/storage/tensor_bytes.h"

namespace tenax::sdk {

/// The storage dtype of a torch scalar type; throws tenax::StorageError for unsupported ones.
storage::DType to_storage_dtype(torch::ScalarType type);
/// The torch scalar type of a storage dtype.
torch::ScalarType to_torch_dtype(storage::DType dtype);

/// A contiguous CPU tensor holding the bytes of `tensor` (copies only when needed). Keep it
/// alive while the returned view of `make_ref` is in use.
torch::Tensor contiguous_cpu(const torch::Tensor& tensor);

/// A borrowed storage view of a contiguous CPU tensor.
storage::TensorRef make_ref(const std::string& name, const torch::Tensor& contiguous_cpu_tensor);

/// An owned CPU tensor with the bytes, dtype and shape of `data`.
torch::Tensor to_tensor(const storage::TensorData& data);

}  // namespace tenax::sdk
