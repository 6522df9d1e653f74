// Bit-exact resume in one process (world 1): a run interrupted by an exception (standing in
// for a crash) and resumed by a fresh Trainer ends with exactly the parameters of an
// uninterrupted run. The multi-process version with SIGKILL lives in tests/integration.
#include "tenax/sdk/trainer.h"

#include <csignal>
#include <filesystem>
#include <fstream>

#include <torch/torch.h>

#include <gtest/gtest.h>

#include "support/temp_dir.h"
#include "support/thread_ranks.h"
#include "tenax/storage/layout.h"
#include "tenax/core/error.h"

namespace tenax::sdk {
namespace {

class Points final : public Dataset {
 public:
  Points() {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(99);
    x_ = at::randn({256, 4}, gen);
    y_ = x_.sum(1, true).sin();
  }
  std::int64_t size() const override { return x_.size(0); }
  Example get(std::int64_t i) const override { return {x_[i], y_[i]}; }

 private:
  torch::Tensor x_, y_;
};

class Net final : public Model {
 public:
  Net() : a_(register_module("a", torch::nn::Linear(4, 16))), b_(register_module("b", torch::nn::Linear(16, 1))) {}
  ModelOutput forward(const Batch& batch) override {
    auto h = torch::dropout(torch::relu(a_(batch.inputs)), 0.2, is_training());
    ModelOutput out;
    out.logits = b_(h);
    out.loss = torch::mse_loss(out.logits, batch.labels);
    return out;
  }

 private:
  torch::nn::Linear a_, b_;
};

struct Crash : std::runtime_error {
  Crash() : std::runtime_error("injected crash") {}
};

class CrashAt final : public TrainerCallback {
 public:
  explicit CrashAt(std::int64_t step) : step_(step) {}
  void on_step_end(const TrainingArguments&, TrainerState& s, TrainerControl&) override {
    if (s.global_step == step_) throw Crash();
  }

 private:
  std::int64_t step_;
};

class Recorder final : public TrainerCallback {
 public:
  std::vector<std::int64_t> saves, logs;
  std::int64_t loaded_step = -1;
  // With async saves on_save comes when the commit is known (the next save point or the end),
  // so the step saved is the one the committed directory names.
  void on_save(const TrainingArguments&, TrainerState& s, TrainerControl&, const std::string& dir) override {
    const auto step = storage::parse_step_dir_name(std::filesystem::path(dir).filename().string());
    ASSERT_TRUE(step.has_value()) << dir;
    EXPECT_LE(*step, s.global_step);
    saves.push_back(*step);
  }
  void on_log(const TrainingArguments&, TrainerState& s, TrainerControl&, const Logs& l) override {
    logs.push_back(s.global_step);
    EXPECT_TRUE(l.count("loss") && l.count("learning_rate"));
  }
  void on_load(const TrainingArguments&, TrainerState& s, TrainerControl&, const std::string&) override {
    loaded_step = s.global_step;
  }
};

TrainingArguments args_for(const std::filesystem::path& dir) {
  TrainingArguments a;
  a.output_dir = dir.string();
  a.max_steps = 30;
  a.save_steps = 10;
  a.logging_steps = 5;
  a.per_device_train_batch_size = 8;
  a.learning_rate = 1e-2;
  a.weight_decay = 0.01;
  a.warmup_steps = 3;
  a.seed = 1234;
  return a;
}

std::filesystem::path fresh_dir(const std::string& name) { return tenax::testing::fresh_path("trainer", name); }

std::vector<torch::Tensor> run(const std::filesystem::path& dir, std::int64_t crash_at, std::uint64_t init_seed,
                               Recorder* recorder = nullptr) {
  torch::set_num_threads(1);
  auto comm = testing::single_rank_communicator();
  elastic::WorkerContext ctx(elastic::WorkerIdentity{}, nullptr, std::move(comm));
  torch::manual_seed(init_seed);
  auto model = std::make_shared<Net>();
  Trainer trainer(model, args_for(dir), std::make_shared<Points>(), ctx);
  if (crash_at > 0) trainer.add_callback(std::make_shared<CrashAt>(crash_at));
  if (recorder) trainer.add_callback(std::shared_ptr<TrainerCallback>(recorder, [](TrainerCallback*) {}));
  trainer.train();
  std::vector<torch::Tensor> params;
  for (auto& p : model->parameters()) params.push_back(p.detach().clone());
  return params;
}

void expect_bit_identical(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << "parameter " << i;
}

TEST(SdkTrainerResume, CrashBetweenCheckpointsResumesBitExactly) {
  const auto reference = run(fresh_dir("ref"), -1, 7);
  const auto dir = fresh_dir("crash");
  EXPECT_THROW(run(dir, 17, 7), Crash);
  Recorder rec;
  // A different init seed proves the parameters come from the checkpoint, not from init.
  const auto resumed = run(dir, -1, 555, &rec);
  EXPECT_EQ(rec.loaded_step, 10);
  EXPECT_EQ(rec.saves, (std::vector<std::int64_t>{20, 30}));
  EXPECT_EQ(rec.logs, (std::vector<std::int64_t>{15, 20, 25, 30}));
  expect_bit_identical(reference, resumed);
}

TEST(SdkTrainerResume, CrashBeforeFirstCheckpointRestartsFromScratch) {
  const auto reference = run(fresh_dir("ref2"), -1, 7);
  const auto dir = fresh_dir("early");
  EXPECT_THROW(run(dir, 4, 7), Crash);
  Recorder rec;
  const auto resumed = run(dir, -1, 7, &rec);
  EXPECT_EQ(rec.loaded_step, -1);
  expect_bit_identical(reference, resumed);
}

TEST(SdkTrainerResume, CorruptNewestCheckpointFallsBackAndStillMatches) {
  const auto reference = run(fresh_dir("ref3"), -1, 7);
  const auto dir = fresh_dir("corrupt");
  EXPECT_THROW(run(dir, 25, 7), Crash);
  const auto shard = dir / "checkpoints" / "step-000000020" / "shard-00000-of-00001.h5";
  std::filesystem::resize_file(shard, std::filesystem::file_size(shard) / 2);  // truncated
  Recorder rec;
  const auto resumed = run(dir, -1, 7, &rec);
  EXPECT_EQ(rec.loaded_step, 10);
  expect_bit_identical(reference, resumed);
}

TEST(SdkTrainerResume, ChangedSeedIsRefused) {
  const auto dir = fresh_dir("seed");
  EXPECT_THROW(run(dir, 12, 7), Crash);
  torch::set_num_threads(1);
  auto comm = testing::single_rank_communicator();
  elastic::WorkerContext ctx(elastic::WorkerIdentity{}, nullptr, std::move(comm));
  auto args = args_for(dir);
  args.seed = 4321;
  Trainer trainer(std::make_shared<Net>(), args, std::make_shared<Points>(), ctx);
  EXPECT_THROW(trainer.train(), ConfigError);
}

// A preemption signal (here raised by the process itself after step 7, as Slurm would send it)
// stops training with a checkpoint; a fresh Trainer resumes there and ends bit-identical to an
// uninterrupted run. Handlers are restored afterwards. The ranks agree on the signal in a
// step's gradient allreduce: one raised after step 7's allreduce (in its on_step_end) rides in
// step 8's, so training stops after step 8.
class RaiseAt final : public TrainerCallback {
 public:
  RaiseAt(std::int64_t step, int signal) : step_(step), signal_(signal) {}
  void on_step_end(const TrainingArguments&, TrainerState& s, TrainerControl&) override {
    if (s.global_step == step_) std::raise(signal_);
  }
  void on_preempt(const TrainingArguments&, TrainerState& s, TrainerControl&, int signal) override {
    preempted_at = s.global_step;
    seen_signal = signal;
  }
  std::int64_t preempted_at = -1;
  int seen_signal = 0;

 private:
  std::int64_t step_;
  int signal_;
};

TEST(SdkTrainerPreemption, SignalStopsAtTheNextStepSavesAndResumesBitExactly) {
  const auto reference = run(fresh_dir("ref-preempt"), -1, 7);
  const auto dir = fresh_dir("preempt");
  torch::set_num_threads(1);
  {
    elastic::WorkerContext ctx(elastic::WorkerIdentity{}, nullptr, testing::single_rank_communicator());
    torch::manual_seed(7);
    Trainer trainer(std::make_shared<Net>(), args_for(dir), std::make_shared<Points>(), ctx);
    auto raise = std::make_shared<RaiseAt>(7, SIGUSR1);
    trainer.add_callback(raise);
    const TrainOutput out = trainer.train();
    EXPECT_TRUE(out.preempted);
    EXPECT_EQ(out.preempt_signal, SIGUSR1);
    EXPECT_EQ(out.global_step, 8);
    EXPECT_EQ(raise->preempted_at, 8);
    EXPECT_EQ(raise->seen_signal, SIGUSR1);
  }
  // The handler is gone with the Trainer: SIGUSR1 would again terminate the process.
  struct sigaction current {};
  ::sigaction(SIGUSR1, nullptr, &current);
  EXPECT_EQ(current.sa_handler, SIG_DFL);
  Recorder rec;
  const auto resumed = run(dir, -1, 555, &rec);
  EXPECT_EQ(rec.loaded_step, 8);
  expect_bit_identical(reference, resumed);
}

}  // namespace
}  // namespace tenax::sdk
