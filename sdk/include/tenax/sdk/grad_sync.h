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
  /// `mirror` (optional; uint8, the same number of bytes on every rank, at most
  /// kMaxMirrorBytes) rides in the same allreduce as the last bucket: after a synchronize() that
  /// returned, mirrors() holds every rank's bytes. A step's gradients and the ranks' mirrored
  /// states (their RNG, for in-process recovery) so arrive together or not at all: a rank that
  /// completed the step holds what a replacement needs to continue from it.
  void synchronize(const torch::Tensor& mirror = {});

  /// [world size, mirror bytes] uint8: every rank's `mirror` of the last synchronize() that
  /// completed with one; undefined before.
  const torch::Tensor& mirrors() const { return mirrors_; }
  /// Collective: mirrors() from every rank's `mirror` without a step (the state at the start).
  void gather_mirrors(const torch::Tensor& mirror);
  /// Adopts a table received from a peer ([world size, bytes] uint8). Not collective.
  void set_mirrors(torch::Tensor table) { mirrors_ = std::move(table); }
  static constexpr std::int64_t kMaxMirrorBytes = 1 << 20;

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
  // The mirror's slots appended to the last bucket: 3 bytes per float, exact (below 2^24).
  void pack_mirror(Bucket& last, const torch::Tensor& mirror);
  void unpack_mirrors(const Bucket& last, std::int64_t mirror_bytes);

  elastic::Communicator& comm_;
  std::vector<torch::Tensor> params_;
  std::vector<Bucket> buckets_;
  torch::Tensor mirrors_;
};

}  // namespace tenax::sdk
