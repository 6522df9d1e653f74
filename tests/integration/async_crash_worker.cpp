// The victim of async_save_crash_test: a worker program for `tenax run` that trains a wide MLP
// (dropout, AdamW: a few MiB of state per rank, so that each phase of a save lasts long
// enough to be hit) through the Trainer with its defaults — asynchronous saves — saving after
// every step, save_total_limit 3. With TENAX_TRACE_FILE set, the SDK's trace points mark the
// phases of every save (tenax/core/trace_point.h); this program adds its own:
//
//   worker.rank <rank>          once the WorkerContext is known (the test maps pid → rank)
//   worker.train.begin <step>   the step it resumed at (0: from scratch)
//   worker.model.step-<S> <d>   rank 0, after step S: the XXH3-64 of the parameters' bytes
//                               (name order, as "model/<name>" in a checkpoint); the test
//                               checks that the checkpoint of step S holds exactly these
//   worker.done <step>          train() returned
//
//   async_crash_worker --output-dir DIR --max-steps N [--width W]
#include <iostream>
#include <map>
#include <string>

#include <torch/torch.h>

#include "tenax/core/checksum.h"
#include "tenax/core/env.h"
#include "tenax/core/error.h"
#include "tenax/core/exit_codes.h"
#include "tenax/core/logging.h"
#include "tenax/core/trace_point.h"
#include "tenax/elastic/worker_context.h"
#include "tenax/sdk/trainer.h"

namespace {

using tenax::sdk::Batch;
using tenax::sdk::Example;
using tenax::sdk::ModelOutput;

constexpr std::int64_t kFeatures = 32;

/// y = sin(x . w) + noise from a private generator: the same data on every rank and run.
class Regression final : public tenax::sdk::Dataset {
 public:
  explicit Regression(std::int64_t size) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
    inputs_ = at::randn({size, kFeatures}, gen);
    targets_ = at::sin(inputs_.matmul(at::randn({kFeatures, 1}, gen))) + 0.05 * at::randn({size, 1}, gen);
  }
  std::int64_t size() const override { return inputs_.size(0); }
  Example get(std::int64_t i) const override { return {inputs_[i], targets_[i]}; }

 private:
  torch::Tensor inputs_, targets_;
};

/// Dropout makes the restored RNG state matter for the bit-identical end state.
class WideMlp final : public tenax::sdk::Model {
 public:
  explicit WideMlp(std::int64_t width)
      : fc1_(register_module("fc1", torch::nn::Linear(kFeatures, width))),
        fc2_(register_module("fc2", torch::nn::Linear(width, width))),
        out_(register_module("out", torch::nn::Linear(width, 1))),
        dropout_(register_module("dropout", torch::nn::Dropout(0.1))) {}

  ModelOutput forward(const Batch& batch) override {
    auto h = dropout_(torch::gelu(fc1_(batch.inputs)));
    h = dropout_(torch::gelu(fc2_(h)));
    ModelOutput out;
    out.logits = out_(h);
    if (batch.labels.defined()) out.loss = torch::mse_loss(out.logits, batch.labels);
    return out;
  }

 private:
  torch::nn::Linear fc1_, fc2_, out_;
  torch::nn::Dropout dropout_;
};

class TraceTrainBegin final : public tenax::sdk::TrainerCallback {
 public:
  void on_train_begin(const tenax::sdk::TrainingArguments&, tenax::sdk::TrainerState& state,
                      tenax::sdk::TrainerControl&) override {
    tenax::trace_point("worker.train.begin", state.global_step);
  }
};

/// The state a checkpoint of this step must hold: its save comes right after on_step_end.
class TraceModelDigest final : public tenax::sdk::TrainerCallback {
 public:
  explicit TraceModelDigest(std::shared_ptr<tenax::sdk::Model> model) : model_(std::move(model)) {}
  void on_step_end(const tenax::sdk::TrainingArguments&, tenax::sdk::TrainerState& state,
                   tenax::sdk::TrainerControl&) override {
    if (state.rank != 0) return;
    std::map<std::string, torch::Tensor> by_name;
    for (const auto& p : model_->named_parameters()) by_name.emplace(p.key(), p.value().detach().contiguous());
    tenax::Xxh3 digest;
    for (const auto& [name, t] : by_name) digest.update(t.data_ptr(), static_cast<std::size_t>(t.nbytes()));
    const std::string event = "worker.model.step-" + std::to_string(state.global_step);
    tenax::trace_point(event.c_str(), static_cast<std::int64_t>(digest.digest()));
  }

 private:
  std::shared_ptr<tenax::sdk::Model> model_;
};

}  // namespace

int main(int argc, char** argv) {
  try {
    tenax::sdk::TrainingArguments args;
    args.max_steps = 100;
    args.save_steps = 1;
    args.save_total_limit = 3;
    args.logging_steps = 10;
    args.per_device_train_batch_size = 8;
    args.learning_rate = 1e-3;
    args.warmup_steps = 5;
    args.disable_tqdm = true;
    std::int64_t width = 1024;
    for (int i = 1; i + 1 < argc; i += 2) {
      const std::string flag = argv[i];
      const std::string value = argv[i + 1];
      if (flag == "--output-dir")
        args.output_dir = value;
      else if (flag == "--max-steps")
        args.max_steps = tenax::env::parse_int(value, flag);
      else if (flag == "--width")
        width = tenax::env::parse_int(value, flag);
      else
        throw tenax::ConfigError("unknown flag " + flag);
    }
    if (argc % 2 != 1) throw tenax::ConfigError("flags come in pairs: --output-dir DIR --max-steps N [--width W]");
    torch::set_num_threads(1);  // fixed arithmetic (bit-exact resume) and 2 ranks on 2 cores
    auto context = tenax::elastic::WorkerContext::from_env();
    tenax::set_log_identity({context.rank(), static_cast<int>(context.generation()), "worker"});
    tenax::trace_point("worker.rank", context.rank());

    torch::manual_seed(args.seed);
    auto model = std::make_shared<WideMlp>(width);
    tenax::sdk::Trainer trainer(model, args, std::make_shared<Regression>(2048), context);
    trainer.add_callback(std::make_shared<TraceTrainBegin>());
    trainer.add_callback(std::make_shared<TraceModelDigest>(model));
    const tenax::sdk::TrainOutput out = trainer.train();
    tenax::trace_point("worker.done", out.global_step);
    context.finalize();
    return out.preempted ? tenax::kExitPreempted : tenax::kExitDone;
  } catch (const tenax::ConfigError& e) {
    std::cerr << "async_crash_worker: configuration error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "async_crash_worker: " << e.what() << "\n";
    return 1;
  }
}
