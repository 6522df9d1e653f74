#include "tenax/sdk/grad_sync.h"

#include <torch/torch.h>

#include "tenax/core/error.h"

namespace tenax::sdk {

GradSync::GradSync(elastic::Communicator& comm, std::vector<torch::Tensor> params,
                   GradSyncOptions options)
    : comm_(comm), params_(std::move(params)) {
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
}

namespace {

constexpr std::int64_t kBytesPerSlot = 3;  // a float32 holds every integer below 2^24 exactly

std::int64_t slots_for(std::int64_t bytes) { return (bytes + kBytesPerSlot - 1) / kBytesPerSlot; }

}  // namespace

void GradSync::pack_mirror(Bucket& last, const torch::Tensor& mirror) {
  const int world = comm_.size();
  const std::int64_t slots = slots_for(mirror.numel());
  const std::int64_t needed = last.numel + slots * world;
  if (last.flat.numel() != needed) {
    // Keep the gradients (they may be views into the old buffer): copy them over once.
    torch::Tensor grown = torch::empty({needed}, torch::kFloat32);
    if (last.flat.defined()) grown.narrow(0, 0, last.numel).copy_(last.flat.narrow(0, 0, last.numel));
    last.flat = grown;
  }
  torch::Tensor area = last.flat.narrow(0, last.numel, slots * world);
  area.zero_();
  const auto* in = mirror.data_ptr<std::uint8_t>();
  float* out = area.data_ptr<float>() + static_cast<std::ptrdiff_t>(comm_.rank()) * slots;
  for (std::int64_t s = 0; s < slots; ++s) {
    std::uint32_t value = 0;
    for (std::int64_t b = 0; b < kBytesPerSlot; ++b) {
      const std::int64_t i = s * kBytesPerSlot + b;
      if (i < mirror.numel()) value |= static_cast<std::uint32_t>(in[i]) << (8 * b);
    }
    out[s] = static_cast<float>(value);
  }
}

void GradSync::unpack_mirrors(const Bucket& last, std::int64_t mirror_bytes) {
  const int world = comm_.size();
  const std::int64_t slots = slots_for(mirror_bytes);
  torch::Tensor table = torch::empty({world, mirror_bytes}, torch::kUInt8);
  const float* in = last.flat.data_ptr<float>() + last.numel;
  auto* out = table.data_ptr<std::uint8_t>();
  for (std::int64_t r = 0; r < world; ++r) {
    for (std::int64_t s = 0; s < slots; ++s) {
      const auto value = static_cast<std::uint32_t>(in[r * slots + s]);
      for (std::int64_t b = 0; b < kBytesPerSlot; ++b) {
        const std::int64_t i = s * kBytesPerSlot + b;
        if (i < mirror_bytes) out[r * mirror_bytes + i] = static_cast<std::uint8_t>(value >> (8 * b));
      }
    }
  }
  mirrors_ = table;
}

void GradSync::synchronize(const torch::Tensor& mirror) {
  const int world = comm_.size();
  torch::NoGradGuard no_grad;
  if (mirror.defined() &&
      (mirror.scalar_type() != torch::kUInt8 || !mirror.is_contiguous() || mirror.numel() > kMaxMirrorBytes)) {
    throw ConfigError("GradSync::synchronize: the mirror must be a contiguous uint8 tensor of at most " +
                      std::to_string(kMaxMirrorBytes) + " bytes");
  }
  if (world == 1) {
    // Nothing to average: the local gradients are the result. Only a parameter without one gets
    // zeros, as it would with more ranks.
    for (torch::Tensor& p : params_) {
      if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    }
    if (mirror.defined()) mirrors_ = mirror.reshape({1, -1}).clone();
    return;
  }
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    Bucket& bucket = buckets_[b];
    const bool carries_mirror = mirror.defined() && b + 1 == buckets_.size();
    if (!bucket.flat.defined()) bucket.flat = torch::empty({bucket.numel}, torch::kFloat32);
    if (carries_mirror) pack_mirror(bucket, mirror);
    // Gradients are views into the bucket (DDP's gradient_as_bucket_view): autograd accumulates
    // straight into it, so no copy in or out. A gradient that is not the view — the first step,
    // or after a zero_grad(set_to_none) — is copied in once and replaced by the view.
    std::int64_t offset = 0;
    for (std::size_t k : bucket.params) {
      torch::Tensor& p = params_[k];
      auto slot = bucket.flat.narrow(0, offset, p.numel());
      const torch::Tensor& grad = p.grad();
      if (!grad.defined()) {
        slot.zero_();
      } else if (grad.data_ptr() != slot.data_ptr()) {
        slot.copy_(grad.reshape({-1}));
      }
      offset += p.numel();
    }
    comm_.allreduce(bucket.flat.data_ptr<float>(), static_cast<std::size_t>(bucket.flat.numel()),
                    elastic::ElementType::kFloat32, elastic::ReduceOp::kSum);
    bucket.flat.narrow(0, 0, bucket.numel).div_(static_cast<double>(world));
    if (carries_mirror) unpack_mirrors(bucket, mirror.numel());
    offset = 0;
    for (std::size_t k : bucket.params) {
      torch::Tensor& p = params_[k];
      auto view = bucket.flat.narrow(0, offset, p.numel()).view(p.sizes());
      if (!p.grad().defined() || p.grad().data_ptr() != view.data_ptr()) p.mutable_grad() = view;
      offset += p.numel();
    }
  }
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
  for (torch::Tensor& p : params_) {
    if (p.grad().defined()) p.mutable_grad().zero_();
  }
}

void GradSync::broadcast_parameters(int root) {
  if (comm_.size() == 1) return;
  torch::NoGradGuard no_grad;
  for (torch::Tensor& p : params_) {
    torch::Tensor buffer = p.detach().contiguous().clone();
    comm_.broadcast(buffer.data_ptr(), static_cast<std::size_t>(buffer.numel()) * buffer.element_size(),
                    root);
    p.copy_(buffer);
  }
}

}  // namespace tenax::sdk
