// Private: the byte count a (dtype, shape) pair implies, overflow-checked.
// Thread-safety: a pure function.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "tenax/storage/tensor_bytes.h"

namespace tenax::storage::detail {

/// product(shape) * dtype_size(dtype); nullopt for a negative dimension or on overflow.
inline std::optional<std::uint64_t> shape_nbytes(DType dtype, const std::vector<std::int64_t>& shape) {
  std::uint64_t total = dtype_size(dtype);
  for (std::int64_t dim : shape) {
    if (dim < 0) return std::nullopt;
    if (__builtin_mul_overflow(total, static_cast<std::uint64_t>(dim), &total)) return std::nullopt;
  }
  return total;
}

}  // namespace tenax::storage::detail
