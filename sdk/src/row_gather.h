// allgather of tensor rows across ranks for Trainer::predict: each rank holds the rows of its
// contiguous shard of a dataset; every rank gets all rows, in rank order (= dataset order).
//
// Uneven shards are padded to the longest one for the fixed-size allgather and the padding is
// dropped again, so the result has exactly sum(rows) rows. Dtype and trailing shape are agreed
// first (a rank with no rows may not know them). Collective.
// Thread-safety: as the communicator (one thread).
#pragma once

#include <cstdint>

#include <torch/types.h>

#include "tenax/elastic/communicator.h"

namespace tenax::sdk::detail {

/// `mine` is this rank's [rows, ...] tensor (undefined when the rank has no rows, or when no
/// rank has such a tensor, e.g. no labels). Returns [total rows, ...] on CPU, or an undefined
/// tensor when no rank had one. Throws tenax::Error when ranks disagree on dtype or trailing
/// shape, or when some ranks with rows have the tensor and others do not.
torch::Tensor allgather_rows(elastic::Communicator& comm, const torch::Tensor& mine, std::int64_t rows);

}  // namespace tenax::sdk::detail
