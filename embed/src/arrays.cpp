#include "arrays.h"

#include <vector>

#include <torch/torch.h>

#include "error_boundary.h"

namespace tenax::capi {
namespace {

std::string named(const char* argument, const std::string& what) { return std::string(argument) + ": " + what; }

torch::ScalarType scalar_type_of(int32_t dtype, const char* argument) {
  switch (dtype) {
    case TENAX_FLOAT32: return torch::kFloat32;
    case TENAX_FLOAT64: return torch::kFloat64;
    case TENAX_INT64: return torch::kInt64;
    default:
      throw InvalidArgument(named(argument, "dtype " + std::to_string(dtype) +
                                                " is not a tenax_dtype (TENAX_FLOAT32, TENAX_FLOAT64, TENAX_INT64)"));
  }
}

const char* order_name(int32_t order) { return order == TENAX_ORDER_F ? "TENAX_ORDER_F" : "TENAX_ORDER_C"; }

/// The shape as the caller declares it in its `order` (the C-order shape reversed for Fortran).
std::vector<int64_t> in_callers_order(torch::IntArrayRef c_shape, int32_t order) {
  std::vector<int64_t> shape(c_shape.begin(), c_shape.end());
  if (order == TENAX_ORDER_F) std::reverse(shape.begin(), shape.end());
  return shape;
}

}  // namespace

std::string dtype_name(int32_t dtype) {
  switch (dtype) {
    case TENAX_FLOAT32: return "TENAX_FLOAT32";
    case TENAX_FLOAT64: return "TENAX_FLOAT64";
    case TENAX_INT64: return "TENAX_INT64";
    default: return std::to_string(dtype);
  }
}

std::string shape_string(torch::IntArrayRef shape) {
  std::string s = "{";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "}";
}

torch::Tensor view_of(const tenax_array* array, const char* argument) {
  if (array == nullptr) throw InvalidArgument(named(argument, "NULL tenax_array pointer"));
  const torch::ScalarType type = scalar_type_of(array->dtype, argument);
  if (array->order != TENAX_ORDER_C && array->order != TENAX_ORDER_F) {
    throw InvalidArgument(named(
        argument, "order " + std::to_string(array->order) + " is not a tenax_order (TENAX_ORDER_C, TENAX_ORDER_F)"));
  }
  if (array->ndim < 1 || array->ndim > TENAX_MAX_DIMS) {
    throw InvalidArgument(
        named(argument, "ndim " + std::to_string(array->ndim) + " is outside 1.." + std::to_string(TENAX_MAX_DIMS)));
  }
  std::vector<int64_t> shape(array->shape, array->shape + array->ndim);
  for (int32_t i = 0; i < array->ndim; ++i) {
    if (shape[i] <= 0) {
      throw InvalidArgument(named(argument, "shape[" + std::to_string(i) + "] is " + std::to_string(shape[i]) +
                                                "; every dimension must be at least 1"));
    }
  }
  if (array->data == nullptr) throw InvalidArgument(named(argument, "data is NULL"));
  if (array->order == TENAX_ORDER_F) std::reverse(shape.begin(), shape.end());
  return torch::from_blob(array->data, shape, torch::TensorOptions().dtype(type));
}

torch::Tensor as_float32(const torch::Tensor& tensor, const char* argument) {
  if (tensor.scalar_type() == torch::kFloat32) return tensor;
  if (tensor.scalar_type() == torch::kFloat64) return tensor.to(torch::kFloat32);
  throw InvalidArgument(
      named(argument, "dtype TENAX_INT64, but this model takes TENAX_FLOAT32 or TENAX_FLOAT64 values"));
}

void write_into(const tenax_array* output, const char* argument, const torch::Tensor& values) {
  torch::Tensor out = view_of(output, argument);
  if (output->dtype == TENAX_INT64) {
    throw InvalidArgument(named(argument, "dtype TENAX_INT64; predictions go into TENAX_FLOAT32 or TENAX_FLOAT64"));
  }
  if (out.sizes() != values.sizes()) {
    throw InvalidArgument(named(argument, "shape " + shape_string(in_callers_order(out.sizes(), output->order)) + " (" +
                                              order_name(output->order) + ") but the prediction's is " +
                                              shape_string(in_callers_order(values.sizes(), output->order)) +
                                              " in that order"));
  }
  out.copy_(values.detach());
}

}  // namespace tenax::capi
