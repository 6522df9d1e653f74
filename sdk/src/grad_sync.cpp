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

void GradSync::synchronize() {
  const int world = comm_.size();
  torch::NoGradGuard no_grad;
  if (world == 1) {
    // Nothing to average: the local gradients are the result. Only a parameter without one gets
    // zeros, as it would with more ranks.
    for (torch::Tensor& p : params_) {
      if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    }
    return;
  }
  for (Bucket& bucket : buckets_) {
    if (!bucket.flat.defined()) bucket.flat = torch::empty({bucket.numel}, torch::kFloat32);
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
    comm_.allreduce(bucket.flat.data_ptr<float>(), static_cast<std::size_t>(bucket.numel),
                    elastic::ElementType::kFloat32, elastic::ReduceOp::kSum);
    bucket.flat.div_(static_cast<double>(world));
    offset = 0;
    for (std::size_t k : bucket.params) {
      torch::Tensor& p = params_[k];
      auto view = bucket.flat.narrow(0, offset, p.numel()).view(p.sizes());
      if (!p.grad().defined() || p.grad().data_ptr() != view.data_ptr()) p.mutable_grad() = view;
      offset += p.numel();
    }
  }
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
