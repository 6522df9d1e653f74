// Data-parallel gradient averaging without c10d's Reducer (DESIGN.md decision 1 and 3).
//
// Parameters are packed, in reverse registration order as DDP does, into flat float32
// buckets of at most `bucket_cap_bytes`; each bucket is allreduced (sum) through the
// generation's Communicator and divided by the world size, always in bucket order, so every
// rank issues the same sequence. DDP's overlap: after prepare_for_backward(), a per-parameter
// hook on autograd's gradient accumulator marks a bucket ready when its last gradient is final,
// and a background thread allreduces it while backward goes on; synchronize() launches what is
// left (the last bucket, and any holding a parameter that got no gradient) and waits for all.
// Without prepare_for_backward(), or with a communicator that must stay on the training thread
// (MPI below MPI_THREAD_SERIALIZED), the same buckets are allreduced in synchronize(), in the
// same order: the results are bit-identical either way. After the first synchronize() each
// gradient is a view into its bucket (DDP's gradient_as_bucket_view), so later backward passes
// accumulate into the buckets and nothing is copied. Zero them with GradSync::zero_grad() (in
// place), not the optimizer's zero_grad(), which detaches (1.x: refused for views) or drops
// (2.x: the next synchronize() copies again) them. With one rank nothing is packed or copied.
// Thread-safety: training thread only; between prepare_for_backward() and synchronize() the
// communicator belongs to GradSync's thread. synchronize() and broadcast_parameters() are collective.
//
//   GradSync sync(ctx.communicator(), model->parameters());
//   sync.broadcast_parameters();            // identical replicas at start
//   sync.zero_grad(); sync.prepare_for_backward(); loss.backward(); sync.synchronize(); optimizer.step();
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include <torch/types.h>

#include "tenax/elastic/communicator.h"

namespace tenax::sdk {

struct GradSyncOptions {
  std::size_t bucket_cap_bytes = 25u << 20;
  /// Allreduce buckets during backward (after prepare_for_backward()); false: all in synchronize().
  bool overlap = true;
};

class GradSync {
 public:
  /// `comm` is borrowed and must outlive this object; `params` are the trainable parameters.
  GradSync(elastic::Communicator& comm, std::vector<torch::Tensor> params, GradSyncOptions options = {});
  ~GradSync();
  // The autograd hooks point at this object.
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  /// The next backward pass is the last before synchronize() (with gradient accumulation: call
  /// it before the last micro-batch's backward only): its buckets are allreduced as soon as
  /// their gradients are final. Not collective.
  void prepare_for_backward();

  /// Collective: averages every parameter's gradient across ranks. A parameter without a
  /// gradient on this rank contributes zeros (and receives the average).
  /// `mirror` (optional; uint8, the same number of bytes on every rank, at most
  /// kMaxMirrorBytes) rides in the same allreduce as the last bucket: after a synchronize() that
  /// returned, mirrors() holds every rank's bytes. A step's gradients and the ranks' mirrored
  /// states (their RNG, for in-process recovery) so arrive together or not at all: a rank that
  /// completed the step holds what a replacement needs to continue from it.
  /// `flag` (0 <= flag < 2^24) rides there too, one slot per rank: three 8-bit fields (the low
  /// one a preemption signal's number, the next the Trainer's regroup request), and each field
  /// of the return value is the largest of that field on any rank, the same on every rank. A
  /// request that every rank must agree on at a step boundary so costs no collective of its own.
  int synchronize(const torch::Tensor& mirror = {}, int flag = 0);
  static constexpr int kMaxFlag = (1 << 24) - 1;
  static constexpr int kFlagFields = 3;

  /// [world size, mirror bytes] uint8: every rank's `mirror` of the last synchronize() that
  /// completed with one; undefined before.
  const torch::Tensor& mirrors() const { return mirrors_; }
  /// Collective: mirrors() from every rank's `mirror` without a step (the state at the start).
  void gather_mirrors(const torch::Tensor& mirror);
  /// Adopts a table received from a peer ([world size, bytes] uint8). Not collective.
  void set_mirrors(torch::Tensor table) { mirrors_ = std::move(table); }
  static constexpr std::int64_t kMaxMirrorBytes = 1 << 20;

  /// Clears every parameter's gradient before a step's backward. Not collective. With more than
  /// one rank the gradients are zeroed in place (they are views into the buckets, which the
  /// allreduce reads); alone they are set to none, as Hugging Face's Trainer does, so that
  /// autograd writes the first micro-batch's gradient instead of adding it to zeros (one pass
  /// over every gradient fewer, and no fill).
  void zero_grad();

  /// Collective: copies rank `root`'s parameter values to every rank.
  void broadcast_parameters(int root = 0);

  std::size_t bucket_count() const { return buckets_.size(); }
  /// Whether buckets are allreduced during backward (see the header comment).
  bool overlaps_backward() const;

 private:
  struct Bucket {
    std::vector<std::size_t> params;  // indices into params_
    std::int64_t numel = 0;
    torch::Tensor flat;  // allocated with more than one rank
  };
  struct Overlap;  // the hooks, the ordered background allreduce and its bookkeeping
  void on_gradient_final(std::size_t param);
  // Puts each gradient of `bucket` not yet there into its slot (zeros for a missing one).
  void fill_slots(Bucket& bucket);
  void reduce_bucket(std::size_t index);
  // What rides after the last bucket's gradients, one area per rank (the others' areas zero, so
  // the sum is a gather): the mirror's bytes, 3 per float (exact below 2^24), then the flag.
  void pack_extras(Bucket& last, const torch::Tensor& mirror, int flag);
  int unpack_extras(const Bucket& last, std::int64_t mirror_bytes);

  elastic::Communicator& comm_;
  std::vector<torch::Tensor> params_;
  std::vector<Bucket> buckets_;
  torch::Tensor mirrors_;
  std::unique_ptr<Overlap> overlap_;
};

}  // namespace tenax::sdk
