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
  for (const Bucket& bucket : buckets_) {
    torch::Tensor flat = torch::empty({bucket.numel}, torch::kFloat32);
    std::int64_t offset = 0;
    for (std::size_t k : bucket.params) {
      torch::Tensor& p = params_[k];
      auto slot = flat.narrow(0, offset, p.numel());
      if (p.grad().defined()) {
        slot.copy_(p.grad().reshape({-1}));
      } else {
        slot.zero_();
      }
      offset += p.numel();
    }
    if (world > 1) {
      comm_.allreduce(flat.data_ptr<float>(), static_cast<std::size_t>(flat.numel()),
                      elastic::ElementType::kFloat32, elastic::ReduceOp::kSum);
      flat.div_(static_cast<double>(world));
    }
    offset = 0;
    for (std::size_t k : bucket.params) {
      torch::Tensor& p = params_[k];
      auto averaged = flat.narrow(0, offset, p.numel()).view(p.sizes());
      if (p.grad().defined()) {
        p.mutable_grad().copy_(averaged);
      } else {
        p.mutable_grad() = averaged.clone();
      }
      offset += p.numel();
    }
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
