// The Trainer's flow against transformers' Trainer: gradient accumulation equals one large
// batch; logging / eval / save strategies by steps and by epoch; TrainerControl flags set by a
// callback (stop, save, evaluate); best-model tracking and load_best_model_at_end; label
// smoothing, data_seed and eval_on_start; bf16 autocast; full_determinism. Ranks are threads
// with real Gloo communicators.
#include <ATen/Context.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <functional>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "config_error.h"
#include "support/temp_dir.h"
#include "support/thread_ranks.h"
#include "tenax/core/error.h"
#include "tenax/sdk/activation_checkpoint.h"
#include "tenax/sdk/autocast.h"
#include "tenax/sdk/callbacks/early_stopping.h"
#include "tenax/sdk/callbacks/progress_bar.h"
#include "tenax/sdk/trainer.h"
#include "tenax/storage/checkpoint_directory.h"
#include "tenax/storage/checkpoint_reader.h"

namespace tenax::sdk {
namespace {

// x_i: 4 features from a fixed private generator; label: a fixed linear rule, 3 classes.
class Points final : public Dataset {
 public:
  explicit Points(std::int64_t n) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
    x_ = at::randn({n, 4}, gen);
    y_ = (x_.select(1, 0) * 3 + x_.select(1, 1)).gt(0).to(torch::kInt64) + x_.select(1, 2).gt(0.5).to(torch::kInt64);
  }
  std::int64_t size() const override { return x_.size(0); }
  Example get(std::int64_t i) const override { return {x_[i], y_[i]}; }

 private:
  torch::Tensor x_, y_;
};

// No dropout: the arithmetic alone decides the result. Same weights on every rank thread.
class Mlp final : public Model {
 public:
  /// `own_label_smoothing`: the model's own loss smooths its labels (torch's cross_entropy option).
  explicit Mlp(double own_label_smoothing = 0.0)
      : fc1_(register_module("fc1", torch::nn::Linear(4, 8))),
        fc2_(register_module("fc2", torch::nn::Linear(8, 3))),
        own_label_smoothing_(own_label_smoothing) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(9);
    torch::NoGradGuard no_grad;
    for (auto& p : parameters()) p.copy_(at::randn(p.sizes(), gen) * 0.5);
  }
  ModelOutput forward(const Batch& batch) override {
    ModelOutput out;
    out.logits = fc2_(torch::tanh(fc1_(batch.inputs)));
    if (batch.labels.defined()) {
      out.loss = torch::nn::functional::cross_entropy(
          out.logits, batch.labels,
          torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(own_label_smoothing_));
    }
    return out;
  }

 private:
  torch::nn::Linear fc1_, fc2_;
  double own_label_smoothing_;
};

// Mlp with one more hidden layer, both recomputable (checkpoint_activations), for the
// gradient_checkpointing runs. No dropout, as Mlp: the rank threads share the CPU generator.
class RecomputableMlp final : public Model {
 public:
  RecomputableMlp()
      : fc1_(register_module("fc1", torch::nn::Linear(4, 8))),
        fc2_(register_module("fc2", torch::nn::Linear(8, 8))),
        fc3_(register_module("fc3", torch::nn::Linear(8, 3))) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(9);
    torch::NoGradGuard no_grad;
    for (auto& p : parameters()) p.copy_(at::randn(p.sizes(), gen) * 0.5);
  }
  bool supports_gradient_checkpointing() const override { return true; }
  void set_gradient_checkpointing(bool on) override { checkpointing_ = on; }
  std::atomic<int> layer_calls{0};  ///< forward and recompute
  ModelOutput forward(const Batch& batch) override {
    torch::Tensor h = batch.inputs;
    for (torch::nn::Linear* layer : {&fc1_, &fc2_}) {
      auto run = [this, layer](const std::vector<torch::Tensor>& in) {
        ++layer_calls;
        return torch::tanh((*layer)(in[0]));
      };
      h = checkpointing_ && is_training() ? checkpoint_activations(run, {h}) : run({h});
    }
    ModelOutput out;
    out.logits = fc3_(h);
    if (batch.labels.defined()) out.loss = torch::nn::functional::cross_entropy(out.logits, batch.labels);
    return out;
  }

 private:
  torch::nn::Linear fc1_, fc2_, fc3_;
  bool checkpointing_ = false;
};

std::filesystem::path fresh_dir(const std::string& name) { return tenax::testing::fresh_path("flow", name); }

TrainingArguments quiet_args(const std::filesystem::path& dir) {
  TrainingArguments a;
  a.output_dir = dir.string();
  a.learning_rate = 0.05;
  a.save_steps = 0;
  a.save_async = false;
  a.handle_preemption_signals = false;
  a.report_to = {"none"};
  a.disable_tqdm = true;
  return a;
}

torch::Tensor flat_parameters(Model& model) {
  std::vector<torch::Tensor> parts;
  for (const auto& p : model.parameters()) parts.push_back(p.detach().reshape({-1}).clone());
  return torch::cat(parts);
}

std::set<std::int64_t> committed_steps(const std::filesystem::path& dir) {
  const auto steps = storage::CheckpointDirectory(dir / "checkpoints").committed_steps();
  return {steps.begin(), steps.end()};
}

struct Recorder final : TrainerCallback {
  std::vector<std::int64_t> log_steps, eval_steps, save_steps, epoch_ends;
  int substeps = 0;
  void on_log(const TrainingArguments&, TrainerState& s, TrainerControl&, const Logs& logs) override {
    if (logs.count("loss")) log_steps.push_back(s.global_step);
  }
  void on_evaluate(const TrainingArguments&, TrainerState& s, TrainerControl&, const Logs&) override {
    eval_steps.push_back(s.global_step);
  }
  void on_save(const TrainingArguments&, TrainerState& s, TrainerControl&, const std::string&) override {
    save_steps.push_back(s.global_step);
  }
  void on_epoch_end(const TrainingArguments&, TrainerState& s, TrainerControl&) override {
    epoch_ends.push_back(s.global_step);
  }
  void on_substep_end(const TrainingArguments&, TrainerState&, TrainerControl&) override { ++substeps; }
};

struct StopAt final : TrainerCallback {
  explicit StopAt(std::int64_t step) : step_(step) {}
  void on_step_end(const TrainingArguments&, TrainerState& s, TrainerControl& c) override {
    if (s.global_step == step_) c.should_training_stop = true;
  }
  std::int64_t step_;
};

// --- gradient accumulation -------------------------------------------------------------

TEST(TrainerFlow, GradientAccumulationFourByEightEqualsOneByThirtyTwo) {
  auto data = std::make_shared<Points>(96);
  auto train = [&](int world, std::int64_t per_device, std::int64_t accumulation, const std::string& name) {
    torch::Tensor result;
    int substeps = 0;
    const std::filesystem::path dir = fresh_dir(name);  // once, not by each rank thread
    testing::run_contexts(world, [&](elastic::WorkerContext& ctx) {
      auto model = std::make_shared<Mlp>();
      TrainingArguments a = quiet_args(dir);
      a.per_device_train_batch_size = per_device;
      a.gradient_accumulation_steps = accumulation;
      a.max_steps = 6;
      a.max_grad_norm = 0.5;  // clipping sees the accumulated gradient, as with one batch
      Trainer trainer(model, a, data, ctx);
      auto recorder = std::make_shared<Recorder>();
      trainer.add_callback(recorder);
      trainer.train();
      if (ctx.rank() == 0) {
        result = flat_parameters(*model);
        substeps = recorder->substeps;
      }
    });
    return std::make_pair(result, substeps);
  };
  const auto [one_batch, no_substeps] = train(1, 32, 1, "acc-1x32");
  const auto [accumulated, substeps] = train(1, 8, 4, "acc-4x8");
  const auto [two_ranks, substeps_2] = train(2, 4, 4, "acc-2x4x4");
  EXPECT_EQ(no_substeps, 0);
  EXPECT_EQ(substeps, 6 * 3) << "on_substep_end after every micro-batch but the last of each step";
  EXPECT_FALSE(torch::equal(one_batch, flat_parameters(*std::make_shared<Mlp>()))) << "training changed nothing";
  EXPECT_TRUE(torch::allclose(accumulated, one_batch, 1e-5, 1e-6)) << (accumulated - one_batch).abs().max();
  EXPECT_TRUE(torch::allclose(two_ranks, one_batch, 1e-5, 1e-6)) << (two_ranks - one_batch).abs().max();
}

// dataloader_drop_last = false on 2 ranks: 100 points in global batches of 16 are 6 full steps
// and a 7th of 4 (2 per rank, one micro-batch where there are 2 otherwise), which every rank
// takes together; the result is the one-rank run's, and include_num_input_tokens_seen counts
// the 100 points' 4 features once, summed over the ranks.
TEST(TrainerFlow, KeptLastBatchOnTwoRanksEqualsOneRankAndTokensAreCountedOverTheRanks) {
  auto data = std::make_shared<Points>(100);
  auto train = [&](int world, std::int64_t per_device, const std::string& name) {
    torch::Tensor result;
    TrainerState state;
    const std::filesystem::path dir = fresh_dir(name);  // once, not by each rank thread
    testing::run_contexts(world, [&](elastic::WorkerContext& ctx) {
      auto model = std::make_shared<Mlp>();
      TrainingArguments a = quiet_args(dir);
      a.per_device_train_batch_size = per_device;
      a.gradient_accumulation_steps = 2;
      a.num_train_epochs = 1;
      a.dataloader_drop_last = false;
      a.include_num_input_tokens_seen = true;
      Trainer trainer(model, a, data, ctx);
      trainer.train();
      if (ctx.rank() == 0) {
        result = flat_parameters(*model);
        state = trainer.state();
      }
    });
    return std::make_pair(result, state);
  };
  const auto [one_rank, one_state] = train(1, 8, "keep-last-1");
  const auto [two_ranks, two_state] = train(2, 4, "keep-last-2");
  EXPECT_EQ(one_state.global_step, 7);
  EXPECT_EQ(two_state.global_step, 7);
  EXPECT_EQ(one_state.num_input_tokens_seen, 100 * 4);
  EXPECT_EQ(two_state.num_input_tokens_seen, 100 * 4);
  EXPECT_TRUE(torch::allclose(two_ranks, one_rank, 1e-5, 1e-6)) << (two_ranks - one_rank).abs().max();
}

// dataloader_num_workers: the next steps' batches load on threads while a step computes; the
// run is bit-identical to loading them in the loop (2 ranks, 2 epochs, an epoch's short last
// step, accumulation), and the samples were read off the training threads.
class ThreadNoting final : public Dataset {
 public:
  explicit ThreadNoting(std::shared_ptr<Points> points) : points_(std::move(points)) {}
  std::int64_t size() const override { return points_->size(); }
  Example get(std::int64_t i) const override { return points_->get(i); }
  Example get_for_epoch(std::int64_t i, std::int64_t epoch) const override {
    std::lock_guard<std::mutex> lock(mutex_);
    threads_.insert(std::this_thread::get_id());
    return points_->get_for_epoch(i, epoch);
  }
  std::set<std::thread::id> threads() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return threads_;
  }

 private:
  std::shared_ptr<Points> points_;
  mutable std::mutex mutex_;
  mutable std::set<std::thread::id> threads_;
};

TEST(TrainerFlow, BatchesLoadedAheadOnThreadsTrainBitIdenticallyToBatchesLoadedInTheLoop) {
  auto points = std::make_shared<Points>(100);
  auto train = [&](std::int64_t workers, const std::string& name) {
    auto data = std::make_shared<ThreadNoting>(points);
    torch::Tensor result;
    std::set<std::thread::id> training_threads;
    std::mutex mutex;
    const std::filesystem::path dir = fresh_dir(name);  // once, not by each rank thread
    testing::run_contexts(2, [&](elastic::WorkerContext& ctx) {
      auto model = std::make_shared<Mlp>();
      TrainingArguments a = quiet_args(dir);
      a.per_device_train_batch_size = 4;
      a.gradient_accumulation_steps = 2;
      a.num_train_epochs = 2;
      a.dataloader_drop_last = false;
      a.dataloader_num_workers = workers;
      Trainer trainer(model, a, data, ctx);
      trainer.train();
      std::lock_guard<std::mutex> lock(mutex);
      training_threads.insert(std::this_thread::get_id());
      if (ctx.rank() == 0) result = flat_parameters(*model);
    });
    std::size_t off_training = 0;
    for (const auto& id : data->threads()) off_training += training_threads.count(id) == 0 ? 1 : 0;
    return std::make_pair(result, off_training);
  };
  const auto [in_loop, none_off] = train(0, "workers-0");
  const auto [ahead, off] = train(2, "workers-2");
  EXPECT_EQ(none_off, 0u);
  EXPECT_GT(off, 0u) << "with dataloader_num_workers = 2 no sample was read off the training threads";
  EXPECT_FALSE(torch::equal(in_loop, flat_parameters(*std::make_shared<Mlp>()))) << "training changed nothing";
  EXPECT_TRUE(torch::equal(ahead, in_loop)) << (ahead - in_loop).abs().max();
}

TEST(TrainerFlow, DataloaderPrefetchFactorWithoutWorkersIsAConfigError) {
  TrainingArguments a = quiet_args(fresh_dir("prefetch-no-workers"));
  a.dataloader_prefetch_factor = 2;
  try {
    a.validate();
    FAIL() << "validate() accepted it";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("TrainingArguments.dataloader_prefetch_factor"), std::string::npos)
        << e.what();
  }
}

// gradient_checkpointing under DDP: the recompute's backward (a backward of its own, inside the
// step's) finishes the parameters' gradients, which GradSync's hooks send while backward runs;
// 2 ranks with overlap and accumulation end bit-identical to the same run without it (dropout's
// replay is model_families_test's GradientCheckpointing.*).
TEST(TrainerFlow, GradientCheckpointingOnTwoRanksGivesTheSameParameters) {
  auto data = std::make_shared<Points>(96);
  auto train = [&](bool checkpointing, const std::string& name) {
    torch::Tensor result;
    int calls = 0;
    const std::filesystem::path dir = fresh_dir(name);  // once, not by each rank thread
    testing::run_contexts(2, [&](elastic::WorkerContext& ctx) {
      auto model = std::make_shared<RecomputableMlp>();
      TrainingArguments a = quiet_args(dir);
      a.per_device_train_batch_size = 4;
      a.gradient_accumulation_steps = 2;
      a.max_steps = 6;
      a.gradient_checkpointing = checkpointing;
      a.ddp_bucket_cap_mb = 1;
      Trainer trainer(model, a, data, ctx);
      trainer.train();
      if (ctx.rank() == 0) {
        result = flat_parameters(*model);
        calls = model->layer_calls;
      }
    });
    return std::make_pair(result, calls);
  };
  const auto [plain, plain_calls] = train(false, "gc-plain");
  const auto [recomputed, recomputed_calls] = train(true, "gc-recomputed");
  EXPECT_EQ(plain_calls, 6 * 2 * 2) << "6 steps of 2 micro-batches through 2 layers";
  // fc2 runs again in backward; fc1's input (the batch) needs no gradient, so fc1 is a plain call
  // (its recompute would give its parameters none: checkpoint_activations' rule).
  EXPECT_EQ(recomputed_calls, plain_calls + 6 * 2);
  EXPECT_FALSE(torch::equal(plain, flat_parameters(*std::make_shared<RecomputableMlp>())))
      << "training changed nothing";
  EXPECT_TRUE(torch::equal(plain, recomputed)) << (plain - recomputed).abs().max();
}

// --- strategies ------------------------------------------------------------------------

TEST(TrainerFlow, EpochStrategiesLogEvaluateAndSaveAtEveryEpochEnd) {
  auto data = std::make_shared<Points>(24);  // global batch 8: 3 steps per epoch
  const auto dir = fresh_dir("epoch");
  Recorder seen;
  testing::run_contexts(2, [&](elastic::WorkerContext& ctx) {
    TrainingArguments a = quiet_args(dir);
    a.per_device_train_batch_size = 4;
    a.max_steps = 7;
    a.logging_strategy = "epoch";
    a.eval_strategy = "epoch";
    a.save_strategy = "epoch";
    Trainer trainer(std::make_shared<Mlp>(), a, data, ctx);
    trainer.set_eval_dataset(data);
    auto recorder = std::make_shared<Recorder>();
    trainer.add_callback(recorder);
    trainer.train();
    if (ctx.rank() == 0) seen = *recorder;
  });
  EXPECT_EQ(seen.epoch_ends, (std::vector<std::int64_t>{3, 6}));
  EXPECT_EQ(seen.log_steps, (std::vector<std::int64_t>{3, 6, 7})) << "and the last step";
  EXPECT_EQ(seen.eval_steps, (std::vector<std::int64_t>{3, 6}));
  EXPECT_EQ(committed_steps(dir), (std::set<std::int64_t>{3, 6, 7})) << "epochs, then the final save";
}

TEST(TrainerFlow, StepStrategiesAndNo) {
  auto data = std::make_shared<Points>(64);
  const auto dir = fresh_dir("steps");
  Recorder seen;
  testing::run_contexts(1, [&](elastic::WorkerContext& ctx) {
    TrainingArguments a = quiet_args(dir);
    a.per_device_train_batch_size = 4;
    a.max_steps = 10;
    a.logging_strategy = "no";
    a.eval_strategy = "steps";
    a.eval_steps = 4;
    a.save_strategy = "steps";
    a.save_steps = 3;
    Trainer trainer(std::make_shared<Mlp>(), a, data, ctx);
    trainer.set_eval_dataset(data);
    auto recorder = std::make_shared<Recorder>();
    trainer.add_callback(recorder);
    trainer.train();
    seen = *recorder;
    EXPECT_EQ(trainer.state().eval_steps, 4);
  });
  EXPECT_TRUE(seen.log_steps.empty()) << "logging_strategy = no";
  EXPECT_EQ(seen.eval_steps, (std::vector<std::int64_t>{4, 8}));
  EXPECT_EQ(committed_steps(dir), (std::set<std::int64_t>{3, 6, 9, 10}));
}

TEST(TrainerFlow, EvalStrategyWithoutAnEvalDatasetIsAConfigErrorNamingTheField) {
  auto data = std::make_shared<Points>(16);
  testing::run_contexts(1, [&](elastic::WorkerContext& ctx) {
    TrainingArguments a = quiet_args(fresh_dir("no-eval-set"));
    a.max_steps = 2;
    a.eval_strategy = "steps";
    Trainer trainer(std::make_shared<Mlp>(), a, data, ctx);
    try {
      trainer.train();
      ADD_FAILURE() << "train() accepted eval_strategy without a dataset";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("eval_strategy"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("set_eval_dataset"), std::string::npos) << e.what();
    }
  });
}

// --- TrainerControl from a callback ----------------------------------------------------

// Asks for the rest of the epoch to be skipped after one given step.
struct EpochStopAt final : TrainerCallback {
  explicit EpochStopAt(std::int64_t step) : step_(step) {}
  void on_step_end(const TrainingArguments&, TrainerState& s, TrainerControl& c) override {
    if (s.global_step == step_) c.should_epoch_stop = true;
  }
  std::int64_t step_;
};

TEST(TrainerFlow, ShouldEpochStopSkipsTheRestOfTheEpochAndAResumeKeepsThePosition) {
  auto data = std::make_shared<Points>(24);  // global batch 8: 3 steps per epoch, 3 epochs = 9
  const auto dir = fresh_dir("epoch-stop");
  auto run = [&](bool first) {
    Recorder seen;
    std::int64_t final_step = -1;
    double final_epoch = 0;
    testing::run_contexts(1, [&](elastic::WorkerContext& ctx) {
      TrainingArguments a = quiet_args(dir);
      a.per_device_train_batch_size = 8;
      a.num_train_epochs = 3;
      a.save_strategy = "epoch";
      Trainer trainer(std::make_shared<Mlp>(), a, data, ctx);
      auto recorder = std::make_shared<Recorder>();
      trainer.add_callback(recorder);
      if (first) {
        trainer.add_callback(std::make_shared<EpochStopAt>(1));  // epoch 1 ends after one step
        trainer.add_callback(std::make_shared<StopAt>(4));       // the job is cut after step 4
      }
      const TrainOutput out = trainer.train();
      seen = *recorder;
      final_step = out.global_step;
      final_epoch = trainer.state().epoch;
    });
    return std::make_tuple(seen, final_step, final_epoch);
  };
  const auto [first, first_step, first_epoch] = run(true);
  EXPECT_EQ(first.epoch_ends, (std::vector<std::int64_t>{1, 4})) << "the forced end, then a full epoch of 3";
  EXPECT_EQ(first_step, 4);
  EXPECT_DOUBLE_EQ(first_epoch, 2.0);
  EXPECT_EQ(committed_steps(dir), (std::set<std::int64_t>{1, 4})) << "save_strategy epoch saved the forced end";
  // The resumed run finds the data position (epoch 2, sample 0) in the checkpoint: it trains
  // the third epoch only, 3 steps, and ends at step 7 (not at 9, which would be 2 extra epochs' worth).
  const auto [second, second_step, second_epoch] = run(false);
  EXPECT_EQ(second_step, 7);
  EXPECT_DOUBLE_EQ(second_epoch, 3.0);
  EXPECT_EQ(second.epoch_ends, (std::vector<std::int64_t>{7}));
}

struct RestartSeen final : TrainerCallback {
  int restarts = 0;
  void on_restart(const TrainingArguments&, TrainerState& s, TrainerControl&) override {
    restarts += s.generation > 0 ? 1 : 100;
  }
};

TEST(TrainerFlow, OnRestartFiresInARestartedGenerationOnly) {
  auto data = std::make_shared<Points>(16);
  for (std::int64_t generation : {0, 2}) {
    elastic::WorkerIdentity id;
    id.generation = generation;
    id.restart_count = generation;
    elastic::WorkerContext ctx(id, nullptr, elastic::make_local_communicator());
    TrainingArguments a = quiet_args(fresh_dir("restart-" + std::to_string(generation)));
    a.max_steps = 1;
    Trainer trainer(std::make_shared<Mlp>(), a, data, ctx);
    auto seen = std::make_shared<RestartSeen>();
    trainer.add_callback(seen);
    trainer.train();
    EXPECT_EQ(seen->restarts, generation > 0 ? 1 : 0) << "generation " << generation;
  }
}

struct Steering final : TrainerCallback {
  std::vector<std::int64_t> evaluated;
  void on_step_end(const TrainingArguments&, TrainerState& s, TrainerControl& c) override {
    if (s.global_step == 2) c.should_save = true;
    if (s.global_step == 3) c.should_evaluate = true;
    if (s.global_step == 5) c.should_training_stop = true;
  }
  void on_evaluate(const TrainingArguments&, TrainerState& s, TrainerControl&, const Logs& m) override {
    if (m.count("eval_loss")) evaluated.push_back(s.global_step);
  }
};

TEST(TrainerFlow, ACallbackStopsTrainingForcesASaveAndForcesAnEvaluation) {
  auto data = std::make_shared<Points>(64);
  const auto dir = fresh_dir("steer");
  std::vector<std::int64_t> evaluated;
  std::int64_t final_step = -1;
  testing::run_contexts(2, [&](elastic::WorkerContext& ctx) {
    TrainingArguments a = quiet_args(dir);
    a.per_device_train_batch_size = 4;
    a.max_steps = 20;
    a.save_strategy = "no";
    Trainer trainer(std::make_shared<Mlp>(), a, data, ctx);
    trainer.set_eval_dataset(data);
    auto steering = std::make_shared<Steering>();
    trainer.add_callback(steering);
    const TrainOutput out = trainer.train();
    if (ctx.rank() == 0) {
      evaluated = steering->evaluated;
      final_step = out.global_step;
    }
  });
  EXPECT_EQ(final_step, 5) << "should_training_stop at step 5";
  EXPECT_EQ(evaluated, (std::vector<std::int64_t>{3})) << "should_evaluate at step 3 only";
  EXPECT_EQ(committed_steps(dir), (std::set<std::int64_t>{2, 5})) << "the forced save, then the final one";
}

// --- best model ------------------------------------------------------------------------

// An evaluation metric that follows a script: the n-th evaluation reports scores[n].
ComputeMetrics scripted(std::vector<double> scores, std::string name = "score") {
  auto calls = std::make_shared<std::size_t>(0);
  return [scores, calls, name](const PredictionOutput&) {
    const double v = scores.at(std::min(*calls, scores.size() - 1));
    ++*calls;
    return std::map<std::string, double>{{name, v}};
  };
}

torch::Tensor saved_parameters(const std::filesystem::path& step_dir, Model& like) {
  auto reader = storage::CheckpointReader::open(step_dir);
  EXPECT_TRUE(reader.is_ok()) << reader.status().to_string();
  std::vector<torch::Tensor> parts;
  for (const auto& item : like.named_parameters()) {
    torch::Tensor t = torch::empty_like(item.value());
    EXPECT_TRUE(reader.value().read_into("model/" + item.key(), t.data_ptr(), t.nbytes()).is_ok());
    parts.push_back(t.reshape({-1}));
  }
  return torch::cat(parts);
}

struct BestCase {
  std::optional<bool> greater_is_better;  // unset: inferred from the metric's name
  std::string metric;
  std::int64_t expected_best_step;
  double expected_best;
  const char* dir;
};

class TrainerBestModel : public ::testing::TestWithParam<BestCase> {};

TEST_P(TrainerBestModel, LoadBestModelAtEndLoadsTheBestCheckpointsParameters) {
  const BestCase c = GetParam();
  auto data = std::make_shared<Points>(64);
  const auto dir = fresh_dir(c.dir);
  // Evaluations at steps 2, 4, 6, 8.
  const std::vector<double> scores = {0.5, 0.9, 0.2, 0.6};
  torch::Tensor final_params, last_step_params;
  TrainerState state;
  testing::run_contexts(2, [&](elastic::WorkerContext& ctx) {
    TrainingArguments a = quiet_args(dir);
    a.per_device_train_batch_size = 4;
    a.max_steps = 8;
    a.eval_strategy = "steps";
    a.eval_steps = 2;
    a.save_strategy = "steps";
    a.save_steps = 2;
    a.save_total_limit = 1;  // the best survives retention
    a.metric_for_best_model = c.metric;
    a.greater_is_better = c.greater_is_better;
    a.load_best_model_at_end = true;
    auto model = std::make_shared<Mlp>();
    Trainer trainer(model, a, data, ctx);
    trainer.set_eval_dataset(data, scripted(scores, c.metric));
    trainer.train();
    if (ctx.rank() == 0) {
      final_params = flat_parameters(*model);
      state = trainer.state();
    }
  });
  const auto step_dir = [&](std::int64_t step) {
    return storage::CheckpointDirectory(dir / "checkpoints").step_dir(step);
  };
  Mlp like;
  ASSERT_TRUE(state.best_metric.has_value());
  EXPECT_DOUBLE_EQ(*state.best_metric, c.expected_best);
  EXPECT_EQ(state.best_model_checkpoint, step_dir(c.expected_best_step).string());
  EXPECT_EQ(committed_steps(dir), (std::set<std::int64_t>{c.expected_best_step, 8})) << "newest + best";
  EXPECT_TRUE(torch::equal(final_params, saved_parameters(step_dir(c.expected_best_step), like)));
  EXPECT_FALSE(torch::equal(final_params, saved_parameters(step_dir(8), like))) << "the last model was kept";
}

// Unset, the direction is transformers' inference: higher is better unless the metric's name ends
// in "loss" (before, an unset direction meant lower is better: an accuracy kept its worst step).
INSTANTIATE_TEST_SUITE_P(Directions, TrainerBestModel,
                         ::testing::Values(BestCase{true, "score", 4, 0.9, "best-up"},
                                           BestCase{false, "score", 6, 0.2, "best-down"},
                                           BestCase{std::nullopt, "accuracy", 4, 0.9, "best-inferred-up"},
                                           // Not "loss": the Trainer's own eval_loss would be the metric.
                                           BestCase{std::nullopt, "nll_loss", 6, 0.2, "best-inferred-down"}),
                         [](const ::testing::TestParamInfo<BestCase>& info) {
                           std::string name = info.param.dir;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(TrainerFlow, LoadBestModelAtEndNeedsMatchingStrategies) {
  TrainingArguments a = quiet_args(fresh_dir("unused"));
  a.max_steps = 4;
  a.load_best_model_at_end = true;
  a.metric_for_best_model = "eval_loss";
  a.eval_strategy = "steps";
  a.save_strategy = "epoch";
  try {
    a.validate();
    ADD_FAILURE() << "mismatched strategies accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("TrainingArguments.save_strategy"), std::string::npos) << e.what();
  }
  a.save_strategy = "sometimes";
  EXPECT_THROW(a.validate(), ConfigError);
}

// save_strategy "best": a checkpoint after each evaluation that improves the metric (and the last
// step, as always); load_best_model_at_end needs no matching strategies then.
TEST(TrainerFlow, SaveStrategyBestSavesAtEachImprovementOnly) {
  auto data = std::make_shared<Points>(64);
  const auto dir = fresh_dir("save-best");
  const std::vector<double> scores = {0.5, 0.9, 0.2, 0.6, 0.95, 0.1};  // evaluations at 2, 4, ..., 12
  Recorder rec;
  TrainerState state;
  testing::run_contexts(2, [&](elastic::WorkerContext& ctx) {
    TrainingArguments a = quiet_args(dir);
    a.per_device_train_batch_size = 4;
    a.max_steps = 12;
    a.eval_strategy = "steps";
    a.eval_steps = 2;
    a.save_strategy = "best";
    a.metric_for_best_model = "accuracy";
    a.load_best_model_at_end = true;
    Trainer trainer(std::make_shared<Mlp>(), a, data, ctx);
    trainer.set_eval_dataset(data, scripted(scores, "accuracy"));
    if (ctx.rank() == 0) trainer.add_callback(std::shared_ptr<TrainerCallback>(&rec, [](TrainerCallback*) {}));
    trainer.train();
    if (ctx.rank() == 0) state = trainer.state();
  });
  EXPECT_EQ(rec.save_steps, (std::vector<std::int64_t>{2, 4, 10, 12}));
  EXPECT_EQ(committed_steps(dir), (std::set<std::int64_t>{2, 4, 10, 12}));
  ASSERT_TRUE(state.best_metric.has_value());
  EXPECT_DOUBLE_EQ(*state.best_metric, 0.95);

  TrainingArguments a = quiet_args(fresh_dir("unused"));
  a.max_steps = 4;
  a.save_strategy = "best";
  a.eval_strategy = "steps";
  std::string message = test_support::config_error([&] { a.validate(); });
  EXPECT_NE(message.find("TrainingArguments.metric_for_best_model"), std::string::npos) << message;
  a.metric_for_best_model = "eval_loss";
  a.eval_strategy = "no";
  message = test_support::config_error([&] { a.validate(); });
  EXPECT_NE(message.find("TrainingArguments.eval_strategy"), std::string::npos) << message;
}

// --- early stopping and resume checks ------------------------------------------------

// Up to 40 steps of 8 samples, an evaluation and a checkpoint every 2 steps, judged by "score".
TrainingArguments early_stopping_args(const std::filesystem::path& dir) {
  TrainingArguments a = quiet_args(dir);
  a.per_device_train_batch_size = 4;
  a.max_steps = 40;
  a.eval_strategy = "steps";
  a.eval_steps = 2;
  a.save_strategy = "steps";
  a.save_steps = 2;
  a.metric_for_best_model = "score";
  return a;
}

TEST(TrainerFlow, EarlyStoppingStopsAtTheEvaluationThatExhaustsPatience) {
  auto data = std::make_shared<Points>(64);
  const auto dir = fresh_dir("early-stop");
  std::int64_t stopped_at = -1;
  testing::run_contexts(2, [&](elastic::WorkerContext& ctx) {
    TrainingArguments a = early_stopping_args(dir);
    a.greater_is_better = true;
    Trainer trainer(std::make_shared<Mlp>(), a, data, ctx);
    // Evaluations at steps 2, 4, 6, 8, ...: 0.6 at step 4 is the best; 0.55 and then 0.58 are
    // two evaluations without improvement, so patience 2 stops at step 8.
    trainer.set_eval_dataset(data, scripted({0.5, 0.6, 0.55, 0.58, 0.9, 0.95}));
    trainer.add_callback(std::make_shared<EarlyStoppingCallback>(2, 0.0));
    const TrainOutput out = trainer.train();
    if (ctx.rank() == 0) stopped_at = out.global_step;
  });
  EXPECT_EQ(stopped_at, 8);
}

// transformers' ExportableState: the patience counter is in every checkpoint. Evaluations at
// steps 2, 4, 6, ...: 0.6 at step 4 is the best, then 0.55, 0.58, 0.57 make patience 3 run out at
// step 10. The first run stops at step 7 (counter 1, saved with the final checkpoint); the resumed
// one goes on counting (2 at step 8, 3 at step 10) unless told not to restore it.
TEST(TrainerFlow, EarlyStoppingsPatienceCounterSurvivesAResume) {
  auto data = std::make_shared<Points>(64);
  const std::vector<double> scores = {0.5, 0.6, 0.55, 0.58, 0.57, 0.9};
  auto run = [&](const std::filesystem::path& dir, std::int64_t stop_at, std::size_t evaluations_done, bool restore) {
    std::int64_t final_step = -1;
    std::int64_t counter = -1;
    testing::run_contexts(2, [&](elastic::WorkerContext& ctx) {
      TrainingArguments a = early_stopping_args(dir);
      a.restore_callback_states_from_checkpoint = restore;
      Trainer trainer(std::make_shared<Mlp>(), a, data, ctx);
      trainer.set_eval_dataset(
          data, scripted({scores.begin() + static_cast<std::ptrdiff_t>(evaluations_done), scores.end()}));
      auto early = std::make_shared<EarlyStoppingCallback>(3, 0.0);
      trainer.add_callback(early);
      trainer.add_callback(std::make_shared<StopAt>(stop_at));
      const TrainOutput out = trainer.train();
      if (ctx.rank() == 0) {
        final_step = out.global_step;
        counter = early->patience_counter();
      }
    });
    return std::make_pair(final_step, counter);
  };
  EXPECT_EQ(run(fresh_dir("patience-whole"), 100, 0, true), std::make_pair(std::int64_t{10}, std::int64_t{3}));

  const auto dir = fresh_dir("patience-resume");
  EXPECT_EQ(run(dir, 7, 0, true), std::make_pair(std::int64_t{7}, std::int64_t{1}));
  EXPECT_EQ(run(dir, 100, 3, true), std::make_pair(std::int64_t{10}, std::int64_t{3}))
      << "the resume from step 7 restored the counter (1) and stopped where the whole run did";

  const auto fresh_counter = fresh_dir("patience-not-restored");
  ASSERT_EQ(run(fresh_counter, 7, 0, true).first, 7);
  EXPECT_EQ(run(fresh_counter, 100, 3, false).first, 18)
      << "restore_callback_states_from_checkpoint = false starts the counter at 0: steps 8 and 10 count 1 and 2, "
         "0.9 at step 12 improves, and 14, 16, 18 run patience out";
}

TEST(TrainerFlow, CallbacksArePoppedAndRemovedByObjectOrByType) {
  auto data = std::make_shared<Points>(32);
  testing::run_contexts(1, [&](elastic::WorkerContext& ctx) {
    TrainingArguments a = quiet_args(fresh_dir("pop-callback"));
    a.disable_tqdm = false;  // a default ProgressBarCallback
    a.per_device_train_batch_size = 4;
    a.max_steps = 2;
    Trainer trainer(std::make_shared<Mlp>(), a, data, ctx);
    auto kept = std::make_shared<Recorder>();
    auto removed = std::make_shared<Recorder>();
    trainer.add_callback(kept);
    trainer.add_callback(removed);
    const std::size_t before = trainer.callbacks().size();
    EXPECT_NE(trainer.pop_callback<ProgressBarCallback>(), nullptr) << "a default callback, by type";
    EXPECT_EQ(trainer.pop_callback<ProgressBarCallback>(), nullptr) << "there was one";
    EXPECT_EQ(trainer.pop_callback(*removed), removed) << "by object";
    EXPECT_EQ(trainer.pop_callback(*removed), nullptr) << "already gone";
    trainer.add_callback(removed);
    trainer.remove_callback(*removed);
    EXPECT_EQ(trainer.callbacks().size(), before - 2);
    trainer.train();
    EXPECT_EQ(removed->save_steps, std::vector<std::int64_t>{}) << "a removed callback is not called";
    EXPECT_EQ(kept->save_steps, (std::vector<std::int64_t>{2})) << "the final save";
    trainer.remove_callback<Recorder>();
    EXPECT_EQ(std::count(trainer.callbacks().begin(), trainer.callbacks().end(), kept), 0);
  });
}

TEST(TrainerFlow, AResumeWithABreakingArgumentChangeIsRefusedAndAHarmlessOneIsNot) {
  auto data = std::make_shared<Points>(64);
  const auto dir = fresh_dir("arg-change");
  auto run = [&](const std::function<void(TrainingArguments&)>& change) {
    testing::run_contexts(1, [&](elastic::WorkerContext& ctx) {
      TrainingArguments a = quiet_args(dir);
      a.per_device_train_batch_size = 8;
      a.max_steps = 6;
      a.save_steps = 3;
      change(a);
      Trainer trainer(std::make_shared<Mlp>(), a, data, ctx);
      trainer.add_callback(std::make_shared<StopAt>(5));
      trainer.train();
    });
  };
  run([](TrainingArguments&) {});
  ASSERT_EQ(committed_steps(dir), (std::set<std::int64_t>{3, 5}));
  try {
    run([](TrainingArguments& a) {
      a.learning_rate = 0.01;
      a.seed = 7;
    });
    ADD_FAILURE() << "a changed learning rate was accepted on resume";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("TrainingArguments.learning_rate"), std::string::npos) << what;
    EXPECT_NE(what.find("TrainingArguments.seed"), std::string::npos) << "every breaking change is listed: " << what;
  }
  EXPECT_EQ(committed_steps(dir), (std::set<std::int64_t>{3, 5})) << "a refused resume changes nothing";
  EXPECT_NO_THROW(run([](TrainingArguments& a) { a.logging_steps = 1; }));
  EXPECT_EQ(committed_steps(dir), (std::set<std::int64_t>{3, 5, 6})) << "resumed at 5, finished at 6";
}

// --- transformers' label_smoothing_factor, data_seed, eval_on_start -------------------

TEST(TrainerFlow, LabelSmoothingTrainsAndEvaluatesOnTheSmoothedLoss) {
  auto data = std::make_shared<Points>(48);
  auto train = [&](double factor, double own, const std::string& name) {
    torch::Tensor params;
    double eval_loss = 0;
    const std::filesystem::path dir = fresh_dir(name);  // once, not by each rank thread
    testing::run_contexts(2, [&](elastic::WorkerContext& ctx) {
      auto model = std::make_shared<Mlp>(own);
      TrainingArguments a = quiet_args(dir);
      a.per_device_train_batch_size = 4;
      a.per_device_eval_batch_size = 24;  // one batch per rank: the mean of means is the mean
      a.max_steps = 5;
      a.label_smoothing_factor = factor;
      Trainer trainer(model, a, data, ctx);
      trainer.train();
      const Logs metrics = trainer.evaluate(*data);
      if (ctx.rank() == 0) {
        params = flat_parameters(*model);
        eval_loss = metrics.at("eval_loss");
      }
    });
    return std::make_pair(params, eval_loss);
  };
  const auto [smoothed, smoothed_eval] = train(0.3, 0.0, "smooth-trainer");
  const auto [own, own_eval] = train(0.0, 0.3, "smooth-model");
  const torch::Tensor plain = train(0.0, 0.0, "smooth-none").first;
  // For sequence classification transformers' LabelSmoother is cross_entropy(label_smoothing).
  EXPECT_TRUE(torch::allclose(smoothed, own, 1e-5, 1e-6)) << (smoothed - own).abs().max();
  EXPECT_NEAR(smoothed_eval, own_eval, 1e-5) << "the evaluation loss is smoothed too, as in transformers";
  EXPECT_FALSE(torch::allclose(smoothed, plain, 1e-4, 1e-5)) << "label_smoothing_factor changed nothing";
}

TEST(TrainerFlow, DataSeedAloneDecidesTheDataOrder) {
  auto data = std::make_shared<Points>(64);
  // Mlp has no dropout: seed only reaches the data order, unless data_seed takes it over.
  auto train = [&](std::uint64_t seed, std::int64_t data_seed, const std::string& name) {
    torch::Tensor params;
    testing::run_contexts(1, [&](elastic::WorkerContext& ctx) {
      auto model = std::make_shared<Mlp>();
      TrainingArguments a = quiet_args(fresh_dir(name));
      a.per_device_train_batch_size = 4;
      a.max_steps = 6;
      a.seed = seed;
      a.data_seed = data_seed;
      Trainer trainer(model, a, data, ctx);
      trainer.train();
      params = flat_parameters(*model);
    });
    return params;
  };
  const torch::Tensor seed1_data7 = train(1, 7, "data-seed-1-7");
  EXPECT_TRUE(torch::equal(seed1_data7, train(2, 7, "data-seed-2-7"))) << "seed changed the order under data_seed";
  EXPECT_FALSE(torch::equal(seed1_data7, train(1, 8, "data-seed-1-8"))) << "data_seed changed nothing";
  EXPECT_TRUE(torch::equal(train(7, -1, "data-seed-7-unset"), train(3, 7, "data-seed-3-7")))
      << "unset, the order is seed's";
}

TEST(TrainerFlow, AResumeWithAnotherDataSeedIsRefused) {
  auto data = std::make_shared<Points>(64);
  const auto dir = fresh_dir("data-seed-resume");
  auto run = [&](std::int64_t data_seed) {
    testing::run_contexts(1, [&](elastic::WorkerContext& ctx) {
      TrainingArguments a = quiet_args(dir);
      a.per_device_train_batch_size = 8;
      a.max_steps = 6;
      a.save_steps = 3;
      a.data_seed = data_seed;
      Trainer trainer(std::make_shared<Mlp>(), a, data, ctx);
      trainer.add_callback(std::make_shared<StopAt>(4));
      trainer.train();
    });
  };
  run(11);
  ASSERT_EQ(committed_steps(dir), (std::set<std::int64_t>{3, 4}));
  try {
    run(12);
    ADD_FAILURE() << "a changed data_seed was accepted on resume";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("TrainingArguments.data_seed"), std::string::npos) << e.what();
  }
  EXPECT_EQ(committed_steps(dir), (std::set<std::int64_t>{3, 4})) << "a refused resume changes nothing";
}

TEST(TrainerFlow, EvalOnStartEvaluatesBeforeTheFirstStepOfEveryTrainCall) {
  auto data = std::make_shared<Points>(32);
  const auto dir = fresh_dir("eval-on-start");
  auto run = [&](std::int64_t stop_at) {
    Recorder seen;
    testing::run_contexts(2, [&](elastic::WorkerContext& ctx) {
      TrainingArguments a = quiet_args(dir);
      a.per_device_train_batch_size = 4;
      a.max_steps = 6;
      a.save_steps = 2;
      a.eval_strategy = "steps";
      a.eval_steps = 4;
      a.eval_on_start = true;
      Trainer trainer(std::make_shared<Mlp>(), a, data, ctx);
      trainer.set_eval_dataset(data);
      auto recorder = std::make_shared<Recorder>();
      trainer.add_callback(recorder);
      trainer.add_callback(std::make_shared<StopAt>(stop_at));
      trainer.train();
      if (ctx.rank() == 0) seen = *recorder;
    });
    return seen.eval_steps;
  };
  EXPECT_EQ(run(3), (std::vector<std::int64_t>{0})) << "before step 1, then nothing until step 4";
  EXPECT_EQ(run(6), (std::vector<std::int64_t>{3, 4})) << "a resume (from step 3) evaluates on start too";

  testing::run_contexts(1, [&](elastic::WorkerContext& ctx) {
    TrainingArguments a = quiet_args(fresh_dir("eval-on-start-no-set"));
    a.max_steps = 2;
    a.eval_on_start = true;
    Trainer trainer(std::make_shared<Mlp>(), a, data, ctx);
    try {
      trainer.train();
      ADD_FAILURE() << "eval_on_start without an evaluation dataset was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("TrainingArguments.eval_on_start"), std::string::npos) << e.what();
    }
  });
}

// resume_from_checkpoint: another run's step 4 starts this run, which then goes on exactly as
// that run did; a restart of it goes on from its own newest, not from step 4 again; going back
// to an older step with newer ones beside it, or starting over where checkpoints are, is refused.
TEST(TrainerFlow, ResumeFromCheckpointStartsARunOnceThenTheRunsOwnCheckpointsRule) {
  auto data = std::make_shared<Points>(64);
  const auto first = fresh_dir("resume-from-first");
  const auto second = fresh_dir("resume-from-second");
  auto run = [&](const std::filesystem::path& dir, const std::string& resume_from) {
    torch::Tensor params;
    std::int64_t resumed_from = -2;
    testing::run_contexts(2, [&](elastic::WorkerContext& ctx) {
      auto model = std::make_shared<Mlp>();
      TrainingArguments a = quiet_args(dir);
      a.per_device_train_batch_size = 4;
      a.max_steps = 6;
      a.save_steps = 2;
      a.resume_from_checkpoint = resume_from;
      Trainer trainer(model, a, data, ctx);
      const TrainOutput out = trainer.train();
      if (ctx.rank() == 0) {
        params = flat_parameters(*model);
        resumed_from = out.resumed_from_step;
      }
    });
    return std::make_pair(params, resumed_from);
  };
  const auto [whole, not_resumed] = run(first, "");
  EXPECT_EQ(not_resumed, -1);
  const std::string step4 = storage::CheckpointDirectory(first / "checkpoints").step_dir(4).string();
  const auto [warm, from4] = run(second, step4);
  EXPECT_EQ(from4, 4);
  EXPECT_TRUE(torch::equal(warm, whole)) << "steps 5 and 6 from another run's step 4 are that run's steps 5 and 6";
  EXPECT_EQ(committed_steps(second), (std::set<std::int64_t>{6})) << "saves go to this run's output_dir";
  EXPECT_EQ(run(second, step4).second, 6) << "a restart goes on from the run's own newest checkpoint";

  const std::string step2 = storage::CheckpointDirectory(first / "checkpoints").step_dir(2).string();
  for (const auto& [argument, says] : std::vector<std::pair<std::string, std::string>>{
           {step2, "newer checkpoints (steps 4, 6)"}, {"false", "a start from scratch"}}) {
    try {
      run(first, argument);
      ADD_FAILURE() << argument << " was followed";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(committed_steps(first), (std::set<std::int64_t>{2, 4, 6})) << "a refusal changes nothing";
}

TEST(TrainerFlow, SaveMetricsAndSaveStateWriteTransformersFiles) {
  auto data = std::make_shared<Points>(32);
  const auto dir = fresh_dir("save-metrics");
  testing::run_contexts(2, [&](elastic::WorkerContext& ctx) {
    TrainingArguments a = quiet_args(dir);
    a.per_device_train_batch_size = 4;
    a.max_steps = 3;
    Trainer trainer(std::make_shared<Mlp>(), a, data, ctx);
    const TrainOutput out = trainer.train();
    trainer.log_metrics("train", out.metrics());
    trainer.save_metrics("train", out.metrics());
    const Logs eval = trainer.evaluate(*data);
    trainer.save_metrics("eval", eval);
    trainer.save_state();
  });
  const auto read = [&](const std::string& name) {
    std::ifstream in(dir / name);
    EXPECT_TRUE(in) << name << " is missing";
    return nlohmann::json::parse(in, nullptr, false);
  };
  const nlohmann::json train = read("train_results.json");
  EXPECT_TRUE(train.contains("train_runtime") && train.contains("train_loss") &&
              train.contains("train_samples_per_second"))
      << train.dump();
  const nlohmann::json all = read("all_results.json");
  EXPECT_TRUE(all.contains("train_loss") && all.contains("eval_loss")) << "merged: " << all.dump();
  EXPECT_EQ(read("trainer_state.json").value("global_step", -1), 3);

  std::ofstream(dir / "all_results.json") << "[1, 2]";
  testing::run_contexts(1, [&](elastic::WorkerContext& ctx) {
    TrainingArguments a = quiet_args(dir);
    Trainer trainer(std::make_shared<Mlp>(), a, data, ctx);
    try {
      trainer.save_metrics("eval", {{"eval_loss", 1.0}});
      ADD_FAILURE() << "a broken all_results.json was overwritten";
    } catch (const StorageError& e) {
      EXPECT_NE(std::string(e.what()).find("all_results.json"), std::string::npos) << e.what();
    }
  });
}

// --- precision and determinism ---------------------------------------------------------

TEST(TrainerFlow, AutocastGuardRunsLinearInBf16AndRestoresTheStateWhenNested) {
  torch::nn::Linear linear(4, 3);
  const auto x = torch::randn({2, 4});
  EXPECT_EQ(linear(x).scalar_type(), torch::kFloat32);
  {
    AutocastGuard outer(torch::kCPU, true);
    EXPECT_EQ(linear(x).scalar_type(), torch::kBFloat16);
    {
      AutocastGuard disabled(torch::kCPU, false);  // a no-op
      EXPECT_EQ(linear(x).scalar_type(), torch::kBFloat16);
    }
    {
      AutocastGuard inner(torch::kCPU, true);
      EXPECT_EQ(linear(x).scalar_type(), torch::kBFloat16);
    }
    EXPECT_EQ(linear(x).scalar_type(), torch::kBFloat16) << "the inner guard restored the outer state";
  }
  EXPECT_EQ(linear(x).scalar_type(), torch::kFloat32);
  EXPECT_EQ(linear->weight.scalar_type(), torch::kFloat32);
}

TEST(TrainerFlow, Bf16TrainingKeepsFloat32MasterWeightsAndLearns) {
  auto data = std::make_shared<Points>(64);
  torch::Tensor before = flat_parameters(*std::make_shared<Mlp>());
  testing::run_contexts(1, [&](elastic::WorkerContext& ctx) {
    TrainingArguments a = quiet_args(fresh_dir("bf16"));
    a.per_device_train_batch_size = 16;
    a.max_steps = 8;
    a.bf16 = true;
    auto model = std::make_shared<Mlp>();
    Trainer trainer(model, a, data, ctx);
    const TrainOutput out = trainer.train();
    EXPECT_TRUE(std::isfinite(out.training_loss));
    for (const auto& p : model->parameters()) EXPECT_EQ(p.scalar_type(), torch::kFloat32);
    EXPECT_FALSE(torch::equal(flat_parameters(*model), before));
    EXPECT_EQ(torch::nn::Linear(4, 3)(torch::randn({1, 4})).scalar_type(), torch::kFloat32) << "autocast left on";
  });
}

TEST(TrainerFlow, FullDeterminismTurnsOnDeterministicAlgorithms) {
  auto data = std::make_shared<Points>(16);
  const bool before = at::globalContext().deterministicAlgorithms();
  ASSERT_FALSE(before);
  testing::run_contexts(1, [&](elastic::WorkerContext& ctx) {
    TrainingArguments a = quiet_args(fresh_dir("determinism"));
    a.max_steps = 1;
    a.full_determinism = true;
    Trainer trainer(std::make_shared<Mlp>(), a, data, ctx);
    trainer.train();
  });
  EXPECT_TRUE(at::globalContext().deterministicAlgorithms());
  at::globalContext().setDeterministicAlgorithms(false, false);  // process-wide: put it back
}

}  // namespace
}  // namespace tenax::sdk
