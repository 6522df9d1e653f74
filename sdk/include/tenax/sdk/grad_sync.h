// Data-parallel gradient averaging without c10d's Reducer (DESIGN.md decision 1 and 3).
//
// Parameters are packed, in reverse registration order as DDP does, into flat float32
// buckets of at most `bucket_cap_bytes`; after backward() each bucket is allreduced (sum)
// through the generation's Communicator and divided by the world size. The order of
// collectives is fixed, so every rank issues the same sequence. After the first
// synchronize() each gradient is a view into its bucket (DDP's gradient_as_bucket_view), so
// later backward passes accumulate into the buckets and nothing is copied. Zero them with
// GradSync::zero_grad() (in place), not the optimizer's zero_grad(), which detaches (1.x:
// refused for views) or drops (2.x: the next synchronize() copies again) them. With one rank
// nothing is packed or copied at all.
// Thread-safety: training thread only. synchronize() and broadcast_parameters() are collective.
//
//   GradSync sync(ctx.communicator(), model->parameters());
//   sync.broadcast_parameters();            // identical replicas at start
//   sync.zero_grad(); loss.backward(); sync.synchronize(); optimizer.step();
#pragma once

#include <cstddef>
#include <vector>

#include <torch/types.h>

#include "tenax/elastic/communicator.h"

namespace tenax::sdk {

struct GradSyncOptions {
  std::size_t bucket_cap_bytes = 25u << 20;
};

class GradSync {
 public:
  /// `comm` is borrowed and must outlive this object; `params` are the trainable parameters.
  GradSync(elastic::Communicator& comm, std::vector<torch::Tensor> params,
           GradSyncOptions options = {});

  /// Collective: averages every parameter's gradient across ranks. A parameter without a
  /// gradient on this rank contributes zeros (and receives the average).
  void synchronize();

  /// Zeroes every parameter's gradient in place (keeping the bucket views). Not collective.
  void zero_grad();

  /// Collective: copies rank `root`'s parameter values to every rank.
  void broadcast_parameters(int root = 0);

  std::size_t bucket_count() const { return buckets_.size(); }

 private:
  struct Bucket {
    std::vector<std::size_t> params;  // indices into params_
    std::int64_t numel = 0;
    torch::Tensor flat;  // allocated at the first multi-rank synchronize()
  };
  elastic::Communicator& comm_;
  std::vector<torch::Tensor> params_;
  std::vector<Bucket> buckets_;
};

}  // namespace tenax::sdk
