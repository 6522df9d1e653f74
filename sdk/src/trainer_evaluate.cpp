// Trainer::predict / evaluate: the evaluation loop (transformers' evaluation_loop), kept apart
// from the training loop in trainer.cpp.
#include <algorithm>
#include <chrono>

#include <spdlog/fmt/fmt.h>
#include <torch/torch.h>

#include "row_gather.h"
#include "training_device.h"
#include "tenax/core/error.h"
#include "tenax/core/logging.h"
#include "tenax/sdk/trainer.h"

namespace tenax::sdk {
namespace {

using Clock = std::chrono::steady_clock;

// The samples [begin, end) one rank predicts: contiguous shards of ceil(N / world) samples, so
// the rows gathered in rank order are in dataset order. The last ranks may get fewer (or none).
struct Shard {
  std::int64_t begin = 0, end = 0;
};

Shard shard_of(std::int64_t size, int rank, int world) {
  const std::int64_t per_rank = (size + world - 1) / world;
  Shard s;
  s.begin = std::min(size, per_rank * rank);
  s.end = std::min(size, s.begin + per_rank);
  return s;
}

// Eval mode for the scope, then back to whatever mode the model was in (train, normally), also
// when a forward throws.
class EvalModeGuard {
 public:
  explicit EvalModeGuard(Model& model) : model_(model), was_training_(model.is_training()) { model_.eval(); }
  ~EvalModeGuard() { model_.train(was_training_); }
  EvalModeGuard(const EvalModeGuard&) = delete;
  EvalModeGuard& operator=(const EvalModeGuard&) = delete;

 private:
  Model& model_;
  bool was_training_;
};

std::string format_metrics(const Logs& metrics) {
  std::string out;
  for (const auto& [key, value] : metrics) out += fmt::format("{}{} {:.4f}", out.empty() ? "" : " | ", key, value);
  return out;
}

}  // namespace

PredictionStepOutput Trainer::prediction_step(Model& model, const Batch& batch) {
  torch::NoGradGuard no_grad;
  ModelOutput out = forward_with_loss(model, batch);
  // Rows are gathered and metrics computed on the host.
  PredictionStepOutput step;
  if (out.loss.defined()) step.loss = out.loss.detach().to(torch::kCPU);
  step.logits = out.logits.detach().to(torch::kCPU);
  step.labels = batch.labels.defined() ? batch.labels.to(torch::kCPU) : batch.labels;
  return step;
}

PredictionOutput Trainer::prediction_loop(const Dataset& dataset, const ComputeMetrics& compute_metrics,
                                          const std::string& prefix) {
  const auto start = Clock::now();
  const std::int64_t size = dataset.size();
  // Every rank sees the same size, so every rank throws here and none waits in a collective.
  if (size <= 0) throw ConfigError(prefix + " dataset is empty: nothing to predict");
  const Shard shard = shard_of(size, context_.rank(), context_.world_size());

  std::vector<torch::Tensor> logits, labels;
  // Sum of (batch mean loss x batch size), samples with a loss, batches without labels.
  double sums[3] = {0.0, 0.0, 0.0};
  {
    EvalModeGuard eval_mode(*model_);
    const std::int64_t batch_size = args_.per_device_eval_batch_size;
    for (std::int64_t first = shard.begin; first < shard.end; first += batch_size) {
      std::vector<Example> examples;
      for (std::int64_t i = first; i < std::min(shard.end, first + batch_size); ++i) examples.push_back(dataset.get(i));
      const auto rows = static_cast<std::int64_t>(examples.size());
      PredictionStepOutput step = prediction_step(*model_, batch_on(collator_(examples), device_));
      progress_.report(state_.global_step);  // a long evaluation is not a hang
      if (!step.logits.defined() || step.logits.dim() < 1 || step.logits.size(0) != rows) {
        throw Error("prediction_step must return logits with one row per sample (" + std::to_string(rows) + ")");
      }
      logits.push_back(step.logits.to(torch::kCPU));
      if (step.labels.defined()) {
        labels.push_back(step.labels.to(torch::kCPU));
      } else {
        sums[2] += 1;
      }
      if (step.loss.defined()) {
        sums[0] += step.loss.item<double>() * static_cast<double>(rows);
        sums[1] += static_cast<double>(rows);
      }
    }
  }
  const std::int64_t rows = shard.end - shard.begin;
  auto& comm = context_.communicator();
  // Reduced before the gathers so that every rank makes the same decision about the labels.
  sums[2] = labels.empty() ? 0.0 : sums[2];
  comm.allreduce(sums, 3, elastic::ElementType::kFloat64, elastic::ReduceOp::kSum);
  if (sums[2] > 0) {
    throw Error("predict: some batches of the " + prefix + " dataset carry labels and others do not");
  }
  PredictionOutput out;
  out.predictions = detail::allgather_rows(comm, logits.empty() ? torch::Tensor() : torch::cat(logits), rows);
  out.label_ids = detail::allgather_rows(comm, labels.empty() ? torch::Tensor() : torch::cat(labels), rows);

  // transformers' naming: metrics that already carry the prefix keep it.
  const std::string key_prefix = prefix + "_";
  if (compute_metrics) {
    for (const auto& [key, value] : compute_metrics(out)) {
      out.metrics[key.rfind(key_prefix, 0) == 0 ? key : key_prefix + key] = value;
    }
  }
  if (sums[1] > 0) out.metrics[key_prefix + "loss"] = sums[0] / sums[1];
  const double runtime = std::chrono::duration<double>(Clock::now() - start).count();
  out.metrics[key_prefix + "runtime"] = runtime;
  out.metrics[key_prefix + "samples_per_second"] = runtime > 0 ? static_cast<double>(size) / runtime : 0.0;
  logger("tenax.trainer", LogPolicy::kRankZeroOnly)
      ->info("{} on {} samples ({} ranks): {}", prefix, size, context_.world_size(), format_metrics(out.metrics));
  progress_.finish();  // the end of a phase that reports progress; the next training step reports again
  return out;
}

PredictionOutput Trainer::predict(const Dataset& dataset, const ComputeMetrics& compute_metrics,
                                  const std::string& metric_key_prefix) {
  PredictionOutput out = prediction_loop(dataset, compute_metrics, metric_key_prefix);
  notify([&](TrainerCallback& cb) { cb.on_predict(args_, state_, control_, out.metrics); });
  return out;
}

Logs Trainer::evaluate(const Dataset& dataset, const ComputeMetrics& compute_metrics,
                       const std::string& metric_key_prefix) {
  PredictionOutput out = prediction_loop(dataset, compute_metrics, metric_key_prefix);
  // As transformers' Trainer.log: the entry carries epoch and step and goes to the history.
  Logs logs = out.metrics;
  logs["epoch"] = state_.epoch;
  logs["step"] = static_cast<double>(state_.global_step);
  if (args_.include_num_input_tokens_seen)
    logs["num_input_tokens_seen"] = static_cast<double>(state_.num_input_tokens_seen);
  state_.log_history.push_back(nlohmann::json(logs));
  notify([&](TrainerCallback& cb) { cb.on_log(args_, state_, control_, logs); });
  notify([&](TrainerCallback& cb) { cb.on_evaluate(args_, state_, control_, out.metrics); });
  return out.metrics;
}

}  // namespace tenax::sdk
