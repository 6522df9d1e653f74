// tenax_array (the caller's memory, C or Fortran order) <-> torch::Tensor.
//
// A Fortran array a(features, batch) is the C array of the reversed shape, so a TENAX_ORDER_F
// array becomes a tensor of the reversed shape over the same memory: nothing is copied, and the
// model always sees {batch, features...}. Every check names the argument ("input: ...") so that
// the error boundary's message says which of the caller's arrays is wrong.
// Thread-safety: stateless.
#pragma once

#include <string>

#include <torch/types.h>

#include "tenax.h"

namespace tenax::capi {

/// A tensor over the caller's memory (no copy) in C order, after checking the array: non-NULL
/// data, ndim 1..TENAX_MAX_DIMS, dims > 0, a tenax_dtype and a tenax_order. InvalidArgument
/// naming `argument` otherwise.
torch::Tensor view_of(const tenax_array* array, const char* argument);
/// `tensor` as float32 (a copy when it is float64; int64 is InvalidArgument naming `argument`).
torch::Tensor as_float32(const torch::Tensor& tensor, const char* argument);
/// Copies `values` ({batch, outputs...}, any float dtype) into the caller's `output`, whose shape
/// must be `values`' (reversed for TENAX_ORDER_F) and dtype float32 or float64.
void write_into(const tenax_array* output, const char* argument, const torch::Tensor& values);

/// "TENAX_FLOAT64" for a tenax_dtype, the number otherwise.
std::string dtype_name(int32_t dtype);
/// "{2, 3}".
std::string shape_string(torch::IntArrayRef shape);

}  // namespace tenax::capi
