#include "tenax/sdk/grad_sync.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <mutex>
#include <utility>

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include "ordered_pipeline.h"
#include "tenax/core/error.h"
#include "torch_compat.h"

namespace tenax::sdk {
namespace {

// Called by autograd after it accumulated a parameter's gradient of this backward pass: the
// gradient is final (DDP's Reducer hooks the same node).
class GradientFinalHook final : public torch::autograd::FunctionPostHook {
 public:
  explicit GradientFinalHook(std::function<void()> on_final) : on_final_(std::move(on_final)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    on_final_();
    return outputs;
  }

 private:
  std::function<void()> on_final_;
};

}  // namespace

struct GradSync::Overlap {
  Overlap(GradSync& owner, bool threaded)
      : threaded(threaded), pipeline([&owner](std::size_t index) { owner.reduce_bucket(index); }, threaded) {}

  const bool threaded;
  std::atomic<bool> armed{false};              // the hooks act only during the backward prepared for
  bool round_open = false;                     // training thread only
  std::mutex mutex;                            // guards the per-round bookkeeping below against the hooks
  std::vector<std::size_t> bucket_of;          // per parameter
  std::vector<std::int64_t> offset_in_bucket;  // per parameter, in elements
  std::vector<std::size_t> pending;            // per bucket: gradients not yet in their slots
  std::vector<char> in_slot;                   // per parameter: this round's gradient is in its slot
  // The accumulators are kept alive with the hooks on them: autograd holds them only weakly
  // between backward passes, and a recreated one would have lost its hook.
  std::vector<std::pair<compat::NodePtr, std::uintptr_t>> hooks;
  OrderedPipeline pipeline;  // last: destroyed first, so its thread stops before the rest goes
};

GradSync::GradSync(elastic::Communicator& comm, std::vector<torch::Tensor> params, GradSyncOptions options)
    : comm_(comm), params_(std::move(params)) {
  const torch::Device device = params_.empty() ? torch::Device(torch::kCPU) : params_.front().device();
  for (const torch::Tensor& p : params_) {
    if (p.device() != device) {
      throw ConfigError("GradSync: the parameters are on " + device.str() + " and " + p.device().str() +
                        "; a rank trains on one device (move the model with model->to(device))");
    }
  }
  if (!device.is_cpu() && comm_.size() > 1 && !comm_.accepts_device_memory()) {
    throw ConfigError("GradSync: the parameters are on " + device.str() +
                      " but this communicator takes host memory only; use the NCCL backend (TENAX_BACKEND=nccl, "
                      "the CUDA build: make build-cuda) or train on the CPU (use_cpu = true)");
  }
  Bucket current;
  std::size_t current_bytes = 0;
  for (std::size_t k = params_.size(); k-- > 0;) {
    const torch::Tensor& p = params_[k];
    if (!p.is_contiguous()) throw ConfigError("GradSync: parameters must be contiguous");
    if (p.scalar_type() != torch::kFloat32) {
      throw ConfigError(std::string("GradSync: parameters must be float32 (master weights); got ") +
                        c10::toString(p.scalar_type()));
    }
    const std::size_t bytes = static_cast<std::size_t>(p.numel()) * sizeof(float);
    if (!current.params.empty() && current_bytes + bytes > options.bucket_cap_bytes) {
      buckets_.push_back(std::move(current));
      current = Bucket{};
      current_bytes = 0;
    }
    current.params.push_back(k);
    current.numel += p.numel();
    current_bytes += bytes;
  }
  if (!current.params.empty()) buckets_.push_back(std::move(current));
  if (comm_.size() == 1) return;

  for (Bucket& bucket : buckets_) bucket.flat = torch::zeros({bucket.numel}, params_.front().options());
  overlap_ = std::make_unique<Overlap>(*this, options.overlap && comm_.callable_from_any_thread());
  Overlap& o = *overlap_;
  o.bucket_of.resize(params_.size());
  o.offset_in_bucket.resize(params_.size());
  o.in_slot.assign(params_.size(), 0);
  o.pending.assign(buckets_.size(), 0);
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    std::int64_t offset = 0;
    for (std::size_t k : buckets_[b].params) {
      o.bucket_of[k] = b;
      o.offset_in_bucket[k] = offset;
      offset += params_[k].numel();
    }
  }
  if (!o.threaded) return;
  for (std::size_t k = 0; k < params_.size(); ++k) {
    if (!params_[k].requires_grad()) continue;  // never final: synchronize() fills its slot
    compat::NodePtr accumulator = torch::autograd::impl::grad_accumulator(params_[k]);
    if (!accumulator) continue;
    const std::uintptr_t key =
        accumulator->add_post_hook(std::make_unique<GradientFinalHook>([this, k] { on_gradient_final(k); }));
    o.hooks.emplace_back(std::move(accumulator), key);
  }
}

GradSync::~GradSync() {
  if (!overlap_) return;
  for (auto& [accumulator, key] : overlap_->hooks) accumulator->del_post_hook(key);
}

bool GradSync::overlaps_backward() const { return overlap_ && overlap_->threaded; }

void GradSync::prepare_for_backward() {
  if (!overlap_) return;
  Overlap& o = *overlap_;
  o.pipeline.begin_round(buckets_.size());
  {
    std::lock_guard<std::mutex> lock(o.mutex);
    for (std::size_t b = 0; b < buckets_.size(); ++b) o.pending[b] = buckets_[b].params.size();
    std::fill(o.in_slot.begin(), o.in_slot.end(), 0);
  }
  o.round_open = true;
  o.armed.store(o.threaded, std::memory_order_release);
}

void GradSync::on_gradient_final(std::size_t param) {
  Overlap& o = *overlap_;
  if (!o.armed.load(std::memory_order_acquire)) return;
  std::size_t launch = buckets_.size();
  {
    std::lock_guard<std::mutex> lock(o.mutex);
    if (o.in_slot[param]) return;
    torch::NoGradGuard no_grad;
    const std::size_t b = o.bucket_of[param];
    const torch::Tensor& p = params_[param];
    torch::Tensor slot = buckets_[b].flat.narrow(0, o.offset_in_bucket[param], p.numel());
    const torch::Tensor& grad = p.grad();
    if (!grad.defined()) {
      slot.zero_();
    } else if (grad.data_ptr() != slot.data_ptr()) {
      slot.copy_(grad.reshape({-1}));  // the first step, before the gradients are bucket views
    }
    o.in_slot[param] = 1;
    // The last bucket waits for synchronize(): it may carry the mirror, which is known only then,
    // and it is the last to be final anyway.
    if (--o.pending[b] == 0 && b + 1 < buckets_.size()) launch = b;
  }
  if (launch < buckets_.size()) o.pipeline.mark_ready(launch);
}

void GradSync::fill_slots(Bucket& bucket) {
  Overlap& o = *overlap_;
  std::lock_guard<std::mutex> lock(o.mutex);
  for (std::size_t k : bucket.params) {
    if (o.in_slot[k]) continue;
    torch::Tensor& p = params_[k];
    torch::Tensor slot = bucket.flat.narrow(0, o.offset_in_bucket[k], p.numel());
    const torch::Tensor& grad = p.grad();
    if (!grad.defined()) {
      slot.zero_();
    } else if (grad.data_ptr() != slot.data_ptr()) {
      slot.copy_(grad.reshape({-1}));
    }
    o.in_slot[k] = 1;
  }
}

void GradSync::reduce_bucket(std::size_t index) {
  torch::NoGradGuard no_grad;  // grad mode is per thread: this may be GradSync's own
  Bucket& bucket = buckets_[index];
  comm_.allreduce(bucket.flat.data_ptr<float>(), static_cast<std::size_t>(bucket.flat.numel()),
                  elastic::ElementType::kFloat32, elastic::ReduceOp::kSum);
  bucket.flat.narrow(0, 0, bucket.numel).div_(static_cast<double>(comm_.size()));
}

namespace {

constexpr std::int64_t kBytesPerSlot = 3;  // a float32 holds every integer below 2^24 exactly

std::int64_t slots_for(std::int64_t bytes) { return (bytes + kBytesPerSlot - 1) / kBytesPerSlot; }

}  // namespace

void GradSync::pack_extras(Bucket& last, const torch::Tensor& mirror, int flag) {
  const int world = comm_.size();
  const std::int64_t mirror_slots = mirror.defined() ? slots_for(mirror.numel()) : 0;
  const std::int64_t per_rank = mirror_slots + 1;
  const std::int64_t needed = last.numel + per_rank * world;
  if (last.flat.numel() != needed) {
    // Keep the gradients (they may be views into the old buffer): copy them over once.
    torch::Tensor grown = torch::empty({needed}, last.flat.options());
    grown.narrow(0, 0, last.numel).copy_(last.flat.narrow(0, 0, last.numel));
    last.flat = grown;
  }
  // Packed on the host, then one copy into the bucket (which may live on a GPU).
  torch::Tensor mine = torch::empty({per_rank}, torch::kFloat32);
  float* out = mine.data_ptr<float>();
  if (mirror.defined()) {
    const auto* in = mirror.data_ptr<std::uint8_t>();
    for (std::int64_t s = 0; s < mirror_slots; ++s) {
      std::uint32_t value = 0;
      for (std::int64_t b = 0; b < kBytesPerSlot; ++b) {
        const std::int64_t i = s * kBytesPerSlot + b;
        if (i < mirror.numel()) value |= static_cast<std::uint32_t>(in[i]) << (8 * b);
      }
      out[s] = static_cast<float>(value);
    }
  }
  out[mirror_slots] = static_cast<float>(flag);
  torch::Tensor area = last.flat.narrow(0, last.numel, per_rank * world);
  area.zero_();
  area.narrow(0, static_cast<std::int64_t>(comm_.rank()) * per_rank, per_rank).copy_(mine);
}

int GradSync::unpack_extras(const Bucket& last, std::int64_t mirror_bytes) {
  const int world = comm_.size();
  const std::int64_t mirror_slots = mirror_bytes > 0 ? slots_for(mirror_bytes) : 0;
  const std::int64_t per_rank = mirror_slots + 1;
  // Summed, not averaged (reduce_bucket divides the gradients only): each value is one rank's.
  const torch::Tensor packed = last.flat.narrow(0, last.numel, per_rank * world).to(torch::kCPU).contiguous();
  const float* in = packed.data_ptr<float>();
  // Field by field (synchronize's contract): a preemption on one rank and a regroup request on
  // another both survive the reduction.
  int flag = 0;
  for (int field = 0; field < kFlagFields; ++field) {
    int largest = 0;
    for (std::int64_t r = 0; r < world; ++r) {
      const int value = static_cast<int>(std::lround(in[r * per_rank + mirror_slots]));
      largest = std::max(largest, (value >> (8 * field)) & 0xFF);
    }
    flag |= largest << (8 * field);
  }
  if (mirror_bytes == 0) return flag;
  torch::Tensor table = torch::empty({world, mirror_bytes}, torch::kUInt8);
  auto* out = table.data_ptr<std::uint8_t>();
  for (std::int64_t r = 0; r < world; ++r) {
    for (std::int64_t s = 0; s < mirror_slots; ++s) {
      const auto value = static_cast<std::uint32_t>(std::lround(in[r * per_rank + s]));
      for (std::int64_t b = 0; b < kBytesPerSlot; ++b) {
        const std::int64_t i = s * kBytesPerSlot + b;
        if (i < mirror_bytes) out[r * mirror_bytes + i] = static_cast<std::uint8_t>(value >> (8 * b));
      }
    }
  }
  mirrors_ = table;
  return flag;
}

int GradSync::synchronize(const torch::Tensor& mirror, int flag) {
  const int world = comm_.size();
  torch::NoGradGuard no_grad;
  if (mirror.defined() &&
      (mirror.scalar_type() != torch::kUInt8 || !mirror.is_contiguous() || mirror.numel() > kMaxMirrorBytes)) {
    throw ConfigError("GradSync::synchronize: the mirror must be a contiguous uint8 tensor of at most " +
                      std::to_string(kMaxMirrorBytes) + " bytes");
  }
  if (flag < 0 || flag > kMaxFlag) {
    throw ConfigError("GradSync::synchronize: flag " + std::to_string(flag) + " is outside 0.." +
                      std::to_string(kMaxFlag));
  }
  if (world == 1) {
    // Nothing to average: the local gradients are the result. Only a parameter without one gets
    // zeros, as it would with more ranks.
    for (torch::Tensor& p : params_) {
      if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    }
    if (mirror.defined()) mirrors_ = mirror.reshape({1, -1}).clone();
    return flag;
  }
  Overlap& o = *overlap_;
  if (!o.round_open) prepare_for_backward();
  o.armed.store(false, std::memory_order_release);
  o.round_open = false;
  // Gradients are views into the buckets (DDP's gradient_as_bucket_view): autograd accumulates
  // straight into them, so no copy in or out. A gradient that is not the view — the first step,
  // or after a zero_grad(set_to_none) — is copied in once and replaced by the view below.
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    if (o.pipeline.is_ready(b)) continue;  // launched during backward
    Bucket& bucket = buckets_[b];
    fill_slots(bucket);
    if (b + 1 == buckets_.size()) pack_extras(bucket, mirror, flag);
    o.pipeline.mark_ready(b);
  }
  o.pipeline.wait();
  int agreed = flag;
  if (buckets_.empty()) {  // no parameters: nothing to ride on
    std::int64_t value = flag;
    comm_.allreduce(&value, 1, elastic::ElementType::kInt64, elastic::ReduceOp::kMax);
    agreed = static_cast<int>(value);
  } else {
    agreed = unpack_extras(buckets_.back(), mirror.defined() ? mirror.numel() : 0);
  }
  for (Bucket& bucket : buckets_) {
    std::int64_t offset = 0;
    for (std::size_t k : bucket.params) {
      torch::Tensor& p = params_[k];
      auto view = bucket.flat.narrow(0, offset, p.numel()).view(p.sizes());
      if (!p.grad().defined() || p.grad().data_ptr() != view.data_ptr()) p.mutable_grad() = view;
      offset += p.numel();
    }
  }
  return agreed;
}

void GradSync::gather_mirrors(const torch::Tensor& mirror) {
  if (mirror.scalar_type() != torch::kUInt8 || !mirror.is_contiguous()) {
    throw ConfigError("GradSync::gather_mirrors: the mirror must be a contiguous uint8 tensor");
  }
  torch::Tensor table = torch::empty({comm_.size(), mirror.numel()}, torch::kUInt8);
  comm_.allgather(mirror.data_ptr(), table.data_ptr(), static_cast<std::size_t>(mirror.numel()));
  mirrors_ = table;
}

void GradSync::zero_grad() {
  torch::NoGradGuard no_grad;
  const bool to_none = comm_.size() == 1;
  for (torch::Tensor& p : params_) {
    if (!p.grad().defined()) continue;
    if (to_none) {
      p.mutable_grad().reset();
    } else {
      p.mutable_grad().zero_();
    }
  }
}

void GradSync::broadcast_parameters(int root) {
  if (comm_.size() == 1) return;
  torch::NoGradGuard no_grad;
  for (torch::Tensor& p : params_) {
    torch::Tensor buffer = p.detach().contiguous().clone();
    comm_.broadcast(buffer.data_ptr(), static_cast<std::size_t>(buffer.numel()) * buffer.element_size(), root);
    p.copy_(buffer);
  }
}

}  // namespace tenax::sdk
