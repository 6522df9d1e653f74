// Bit-exact resume in one process (world 1): a run interrupted by an exception (standing in
// for a crash) and resumed by a fresh Trainer ends with exactly the parameters of an
// uninterrupted run. The multi-process version with SIGKILL lives in tests/integration.
#include "tenax/sdk/trainer.h"

#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <vector>
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <optional>

#include <torch/torch.h>
#include <torch/version.h>

#include <gtest/gtest.h>

#include "support/temp_dir.h"
#include "support/thread_ranks.h"
#include "tenax/storage/checkpoint_reader.h"
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
  Example get(std::int64_t i) const override {
    std::lock_guard<std::mutex> lock(mutex_);
    fetched_.push_back(i);
    return {x_[i], y_[i]};
  }
  /// Lengths for group_by_length: 1..101, one point of 101 in every 101.
  std::int64_t length(std::int64_t i) const override { return 1 + (i * 37) % 101; }
  std::vector<std::int64_t> fetched() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return fetched_;
  }

 private:
  torch::Tensor x_, y_;
  mutable std::mutex mutex_;
  mutable std::vector<std::int64_t> fetched_;
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

// fp16 with a loss scale that overflows at first (2^24, as a model whose gradients are large
// would) and grows after 4 good steps: a 30-step run skips steps, backs off and grows again.
class OverflowingFp16Trainer final : public Trainer {
 public:
  using Trainer::Trainer;

 protected:
  GradScalerOptions grad_scaler_options() const override {
    GradScalerOptions options;
    options.init_scale = 16777216.0;
    options.growth_interval = 4;
    return options;
  }
};

struct RunOptions {
  Recorder* recorder = nullptr;
  bool fp16 = false;
  std::vector<std::shared_ptr<TrainerCallback>> callbacks;
  std::optional<LossScaleState>* final_loss_scale = nullptr;
  bool ignore_data_skip = false;
  bool save_only_model = false;
  OptimizerName optim = OptimizerName::kAdamWTorch;
  bool drop_last = true;
  std::int64_t batch = 8;
  bool count_tokens = false;
  bool group_by_length = false;
  TrainerState* final_state = nullptr;
  std::shared_ptr<Points> dataset;  ///< default: a fresh one
};

RunOptions recorded(Recorder* recorder) {
  RunOptions options;
  options.recorder = recorder;
  return options;
}

std::vector<torch::Tensor> run(const std::filesystem::path& dir, std::int64_t crash_at, std::uint64_t init_seed,
                               RunOptions options = {}) {
  torch::set_num_threads(1);
  auto comm = testing::single_rank_communicator();
  elastic::WorkerContext ctx(elastic::WorkerIdentity{}, nullptr, std::move(comm));
  torch::manual_seed(init_seed);
  auto model = std::make_shared<Net>();
  TrainingArguments args = args_for(dir);
  args.fp16 = options.fp16;
  args.ignore_data_skip = options.ignore_data_skip;
  args.save_only_model = options.save_only_model;
  args.optim = options.optim;
  args.dataloader_drop_last = options.drop_last;
  args.per_device_train_batch_size = options.batch;
  args.include_num_input_tokens_seen = options.count_tokens;
  args.group_by_length = options.group_by_length;
  const std::shared_ptr<Points> points = options.dataset ? options.dataset : std::make_shared<Points>();
  std::unique_ptr<Trainer> trainer = options.fp16 ? std::make_unique<OverflowingFp16Trainer>(model, args, points, ctx)
                                                  : std::make_unique<Trainer>(model, args, points, ctx);
  if (crash_at > 0) trainer->add_callback(std::make_shared<CrashAt>(crash_at));
  if (options.recorder) {
    trainer->add_callback(std::shared_ptr<TrainerCallback>(options.recorder, [](TrainerCallback*) {}));
  }
  for (const auto& callback : options.callbacks) trainer->add_callback(callback);
  trainer->train();
  if (options.final_loss_scale) *options.final_loss_scale = trainer->state().loss_scale;
  if (options.final_state) *options.final_state = trainer->state();
  std::vector<torch::Tensor> params;
  for (auto& p : model->parameters()) params.push_back(p.detach().clone());
  return params;
}

void expect_bit_identical(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << "parameter " << i;
}

// A run of `options` crashed after step `crash_at`, then resumed by a fresh Trainer whose init
// seed differs (the parameters must come from the checkpoint), ends bit-identical to
// `reference`. Returns the step the resume loaded.
std::int64_t crash_and_resume(const std::string& name, std::int64_t crash_at, RunOptions options,
                              const std::vector<torch::Tensor>& reference) {
  const auto dir = fresh_dir(name);
  EXPECT_THROW(run(dir, crash_at, 7, options), Crash);
  Recorder rec;
  options.recorder = &rec;
  expect_bit_identical(reference, run(dir, -1, 555, options));
  return rec.loaded_step;
}

TEST(SdkTrainerResume, CrashBetweenCheckpointsResumesBitExactly) {
  const auto reference = run(fresh_dir("ref"), -1, 7);
  const auto dir = fresh_dir("crash");
  EXPECT_THROW(run(dir, 17, 7), Crash);
  Recorder rec;
  // A different init seed proves the parameters come from the checkpoint, not from init.
  const auto resumed = run(dir, -1, 555, recorded(&rec));
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
  const auto resumed = run(dir, -1, 7, recorded(&rec));
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
  const auto resumed = run(dir, -1, 7, recorded(&rec));
  EXPECT_EQ(rec.loaded_step, 10);
  expect_bit_identical(reference, resumed);
}

// ignore_data_skip: the resumed run starts the epoch it was in from its first batch, and a later
// resume (without it) goes on from the position that run saved, behind its step.
class EpochWatch final : public TrainerCallback {
 public:
  void on_step_end(const TrainingArguments&, TrainerState& s, TrainerControl&) override {
    epochs[s.global_step] = s.epoch;
  }
  std::map<std::int64_t, double> epochs;
};

TEST(SdkTrainerResume, IgnoreDataSkipStartsTheEpochAgainAndALaterResumeKeepsItsPosition) {
  const auto dir = fresh_dir("ignore-data-skip");
  EXPECT_THROW(run(dir, 17, 7), Crash);  // saved at 10, in epoch 0 (32 steps of 8 of 256 points)
  auto replay = std::make_shared<EpochWatch>();
  RunOptions options;
  options.ignore_data_skip = true;
  options.callbacks = {replay};
  EXPECT_THROW(run(dir, 25, 7, options), Crash);  // saved at 20
  EXPECT_DOUBLE_EQ(replay->epochs.at(11), 1.0 / 32) << "step 11 took the epoch's first batch";
  EXPECT_DOUBLE_EQ(replay->epochs.at(20), 10.0 / 32);
  auto later = std::make_shared<EpochWatch>();
  Recorder rec;
  RunOptions plain;
  plain.recorder = &rec;
  plain.callbacks = {later};
  run(dir, -1, 7, plain);
  EXPECT_EQ(rec.loaded_step, 20);
  EXPECT_DOUBLE_EQ(later->epochs.at(21), 11.0 / 32) << "the position saved at step 20, 10 batches behind it";
  EXPECT_DOUBLE_EQ(later->epochs.at(30), 20.0 / 32);
}

// save_only_model: checkpoints with the parameters, the data position and the TrainerState but no
// optimizer state or random streams; a resume from one goes on at its step with a fresh optimizer.
TEST(SdkTrainerResume, SaveOnlyModelKeepsTheModelAndAResumeGoesOnWithAFreshOptimizer) {
  const auto reference = run(fresh_dir("model-only-ref"), -1, 7);
  const auto dir = fresh_dir("model-only");
  RunOptions model_only;
  model_only.save_only_model = true;
  EXPECT_THROW(run(dir, 17, 7, model_only), Crash);
  auto reader = storage::CheckpointReader::open(dir / "checkpoints" / "step-000000010");
  ASSERT_TRUE(reader.is_ok()) << reader.status().to_string();
  int model_tensors = 0;
  for (const auto& [name, entry] : reader.value().manifest().tensors) {
    EXPECT_TRUE(name.rfind("optim/", 0) != 0 && name.rfind("rng/", 0) != 0) << name;
    model_tensors += name.rfind("model/", 0) == 0 ? 1 : 0;
  }
  EXPECT_EQ(model_tensors, 4) << "a.weight, a.bias, b.weight, b.bias";
  EXPECT_EQ(reader.value().manifest().tensors.count("sampler"), 1u) << "the data position is kept";
  Recorder rec;
  model_only.recorder = &rec;
  const auto resumed = run(dir, -1, 555, model_only);
  EXPECT_EQ(rec.loaded_step, 10);
  EXPECT_EQ(rec.saves, (std::vector<std::int64_t>{20, 30}));
  bool all_equal = true;
  for (std::size_t i = 0; i < reference.size(); ++i) all_equal = all_equal && torch::equal(reference[i], resumed[i]);
  EXPECT_FALSE(all_equal) << "fresh optimizer moments change the rest of the run";
}

// Every optimizer of `optim` checkpoints its state: a crash between checkpoints resumes
// bit-exactly, and the optimizers differ (the option is not ignored).
TEST(SdkTrainerResume, EveryOptimizerResumesBitExactly) {
  std::map<std::string, std::vector<torch::Tensor>> references;
  for (const OptimizerName optim : {OptimizerName::kSgd, OptimizerName::kAdafactor, OptimizerName::kAdamWTorchFused}) {
    const std::string name = Choice<OptimizerName>(optim).name();
    SCOPED_TRACE(name);
    RunOptions options;
    options.optim = optim;
    const auto reference = run(fresh_dir("optim-ref-" + name), -1, 7, options);
    EXPECT_EQ(crash_and_resume("optim-" + name, 17, options, reference), 10);
    references[name] = reference;
  }
  const auto differ = [](const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
    return !torch::equal(a[0], b[0]);
  };
  EXPECT_TRUE(differ(references.at("sgd"), references.at("adafactor")));
  EXPECT_TRUE(differ(references.at("sgd"), references.at("adamw_torch_fused")));
  EXPECT_TRUE(differ(references.at("adafactor"), references.at("adamw_torch_fused")));
}

// A checkpoint's optimizer state belongs to its optimizer: resuming with another is refused
// (exit 2) naming optim; adamw_torch and adamw_torch_fused are the same AdamW.
TEST(SdkTrainerResume, ResumingWithAnotherOptimizerIsRefusedNamingOptim) {
  const auto dir = fresh_dir("optim-changed");
  RunOptions sgd;
  sgd.optim = OptimizerName::kSgd;
  EXPECT_THROW(run(dir, 12, 7, sgd), Crash);
  RunOptions adafactor;
  adafactor.optim = OptimizerName::kAdafactor;
  try {
    run(dir, -1, 7, adafactor);
    ADD_FAILURE() << "resumed an SGD checkpoint with Adafactor";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("TrainingArguments.optim"), std::string::npos) << e.what();
  }
  const auto adamw_dir = fresh_dir("optim-adamw-alias");
  EXPECT_THROW(run(adamw_dir, 12, 7), Crash);
  RunOptions fused;
  fused.optim = OptimizerName::kAdamWTorchFused;
  Recorder rec;
  fused.recorder = &rec;
  run(adamw_dir, -1, 7, fused);
  EXPECT_EQ(rec.loaded_step, 10);
}

// dataloader_drop_last = false: 256 points in global batches of 12 make 21 full steps and a
// 22nd of the last 4 points in every epoch; a 30-step run crosses it, and a crash after it
// resumes bit-exactly from a checkpoint before it.
TEST(SdkTrainerResume, KeepingTheLastBatchAddsAShortStepPerEpochAndResumesBitExactly) {
  RunOptions keep;
  keep.drop_last = false;
  keep.batch = 12;
  auto epochs = std::make_shared<EpochWatch>();
  keep.callbacks = {epochs};
  const auto reference = run(fresh_dir("keep-last-ref"), -1, 7, keep);
  EXPECT_DOUBLE_EQ(epochs->epochs.at(21), 21.0 / 22);
  EXPECT_DOUBLE_EQ(epochs->epochs.at(22), 1.0) << "the short step ends the epoch";
  EXPECT_DOUBLE_EQ(epochs->epochs.at(23), 1.0 + 1.0 / 22);
  keep.callbacks.clear();
  EXPECT_EQ(crash_and_resume("keep-last", 25, keep, reference), 20) << "after the short step, from before it";
  RunOptions drop = keep;
  drop.drop_last = true;
  const auto dropped = run(fresh_dir("drop-last-ref"), -1, 7, drop);
  EXPECT_FALSE(torch::equal(reference[0], dropped[0])) << "the kept batch was trained on";
}

// include_num_input_tokens_seen: every step adds its inputs' elements (8 points x 4 features),
// the count rides in the checkpoint through a crash, and every log carries it.
class TokenLogs final : public TrainerCallback {
 public:
  void on_log(const TrainingArguments&, TrainerState& s, TrainerControl&, const Logs& l) override {
    const auto it = l.find("num_input_tokens_seen");
    seen[s.global_step] = it == l.end() ? -1.0 : it->second;
  }
  std::map<std::int64_t, double> seen;
};

TEST(SdkTrainerResume, InputTokensSeenAreCountedLoggedAndResumed) {
  const auto dir = fresh_dir("tokens");
  RunOptions count;
  count.count_tokens = true;
  EXPECT_THROW(run(dir, 17, 7, count), Crash);
  auto logs = std::make_shared<TokenLogs>();
  count.callbacks = {logs};
  TrainerState final_state;
  count.final_state = &final_state;
  run(dir, -1, 7, count);
  EXPECT_EQ(final_state.num_input_tokens_seen, 30 * 8 * 4);
  EXPECT_DOUBLE_EQ(logs->seen.at(15), 15 * 8 * 4.0) << "counted from the checkpoint at step 10 on";
  EXPECT_DOUBLE_EQ(logs->seen.at(30), 30 * 8 * 4.0);
  RunOptions plain;
  plain.final_state = &final_state;
  auto untouched = std::make_shared<TokenLogs>();
  plain.callbacks = {untouched};
  run(fresh_dir("tokens-off"), -1, 7, plain);
  EXPECT_EQ(final_state.num_input_tokens_seen, 0);
  EXPECT_DOUBLE_EQ(untouched->seen.at(30), -1.0) << "not logged without the option";
}

// group_by_length: the first step takes the longest point (length 101), batches take points of
// similar length, and a crash resumes bit-exactly (the order is a function of seed and epoch).
TEST(SdkTrainerResume, LengthGroupedOrderStartsWithTheLongestAndResumesBitExactly) {
  RunOptions grouped;
  grouped.group_by_length = true;
  grouped.dataset = std::make_shared<Points>();
  const auto reference = run(fresh_dir("grouped-ref"), -1, 7, grouped);
  const std::vector<std::int64_t> fetched = grouped.dataset->fetched();
  ASSERT_GE(fetched.size(), 16u);
  const Points lengths;
  std::int64_t first_max = 0, spread = 0;
  for (std::size_t i = 0; i < 8; ++i) first_max = std::max(first_max, lengths.length(fetched[i]));
  EXPECT_EQ(first_max, 101) << "the longest point is in the first batch";
  for (std::size_t i = 8; i < 16; ++i) {
    spread = std::max(spread, std::abs(lengths.length(fetched[i]) - lengths.length(fetched[8])));
  }
  EXPECT_LE(spread, 40) << "the second batch's lengths are close (sorted within a mega-batch of 64 points)";
  grouped.dataset.reset();
  EXPECT_EQ(crash_and_resume("grouped", 17, grouped, reference), 10);
  const auto plain = run(fresh_dir("grouped-off"), -1, 7);
  EXPECT_FALSE(torch::equal(reference[0], plain[0])) << "grouping changed the order";
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
  const auto resumed = run(dir, -1, 555, recorded(&rec));
  EXPECT_EQ(rec.loaded_step, 8);
  expect_bit_identical(reference, resumed);
}

TEST(SdkTrainerGradientCheckpointing, AModelThatCannotRecomputeItsLayersIsRefused) {
  elastic::WorkerContext ctx(elastic::WorkerIdentity{}, nullptr, testing::single_rank_communicator());
  TrainingArguments args = args_for(fresh_dir("checkpointing-refused"));
  args.gradient_checkpointing = true;
  try {
    Trainer trainer(std::make_shared<Net>(), args, std::make_shared<Points>(), ctx);
    FAIL() << "gradient_checkpointing on a model without layers to recompute was accepted";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("TrainingArguments.gradient_checkpointing"), std::string::npos) << what;
    EXPECT_NE(what.find("checkpoint_activations"), std::string::npos) << what;
  }
}

// fp16 (tenax/sdk/loss_scale.h). libtorch 1.13 (the default flavour) has no float16 autocast on
// CPUs: there the run is refused before anything starts; torch 2.x (the CUDA flavour, whose tests
// run on this CPU) trains with it.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)

RunOptions in_fp16(Recorder* recorder = nullptr, std::optional<LossScaleState>* final_loss_scale = nullptr) {
  RunOptions options;
  options.recorder = recorder;
  options.fp16 = true;
  options.final_loss_scale = final_loss_scale;
  return options;
}

// Every step's parameters and loss scale, to see what a skipped step left alone.
class StepWatch final : public TrainerCallback {
 public:
  void on_step_end(const TrainingArguments&, TrainerState& s, TrainerControl&) override {
    std::vector<torch::Tensor> now;
    for (const auto& p : model_->parameters()) now.push_back(p.detach().clone());
    params.push_back(std::move(now));
    scales.push_back(*s.loss_scale);
  }
  explicit StepWatch(std::shared_ptr<Model> model) : model_(std::move(model)) {}
  std::vector<std::vector<torch::Tensor>> params;
  std::vector<LossScaleState> scales;

 private:
  std::shared_ptr<Model> model_;
};

TEST(SdkTrainerFp16, OverflowingStepsAreSkippedTheScaleBacksOffAndGrows) {
  torch::set_num_threads(1);
  elastic::WorkerContext ctx(elastic::WorkerIdentity{}, nullptr, testing::single_rank_communicator());
  torch::manual_seed(7);
  auto model = std::make_shared<Net>();
  TrainingArguments args = args_for(fresh_dir("fp16-steps"));
  args.fp16 = true;
  OverflowingFp16Trainer trainer(model, args, std::make_shared<Points>(), ctx);
  auto watch = std::make_shared<StepWatch>(model);
  trainer.add_callback(watch);
  trainer.train();
  ASSERT_EQ(watch->scales.size(), 30u);
  int skipped = 0, grown = 0, updates = 0;
  LossScaleState before{16777216.0, 0, 0};
  for (std::size_t i = 0; i < watch->scales.size(); ++i) {
    const LossScaleState& after = watch->scales[i];
    if (after.skipped_steps > before.skipped_steps) {
      ++skipped;
      EXPECT_EQ(after.scale, before.scale / 2) << "step " << i + 1;
      EXPECT_EQ(after.growth_tracker, 0);
      if (i > 0) {
        for (std::size_t p = 0; p < watch->params[i].size(); ++p) {
          EXPECT_TRUE(torch::equal(watch->params[i][p], watch->params[i - 1][p])) << "skipped step " << i + 1;
        }
      }
    } else if (after.scale > before.scale) {
      ++grown;
      ++updates;
      EXPECT_EQ(after.scale, before.scale * 2) << "step " << i + 1;
      EXPECT_EQ(before.growth_tracker, 3);
    } else {
      EXPECT_EQ(after.growth_tracker, before.growth_tracker + 1) << "step " << i + 1;
      ++updates;
      // The schedule did not advance on the skipped steps (transformers steps it only when the
      // optimizer ran): the first update runs at schedule step 0, whose warmup rate is 0.
      if (i > 0) {
        EXPECT_EQ(torch::equal(watch->params[i][0], watch->params[i - 1][0]), updates == 1)
            << "step " << i + 1 << ", update " << updates;
      }
    }
    before = after;
  }
  EXPECT_GE(skipped, 3) << "2^24 overflows float16 at first";
  EXPECT_GE(grown, 1) << "growth_interval 4 grows the scale again";
  for (const auto& p : model->parameters()) EXPECT_TRUE(torch::isfinite(p).all().item<bool>());
}

TEST(SdkTrainerFp16, ACrashBetweenCheckpointsResumesBitExactlyWithTheLossScale) {
  std::optional<LossScaleState> reference_scale, resumed_scale;
  const auto reference = run(fresh_dir("fp16-ref"), -1, 7, in_fp16(nullptr, &reference_scale));
  const auto dir = fresh_dir("fp16-crash");
  EXPECT_THROW(run(dir, 17, 7, in_fp16()), Crash);
  Recorder rec;
  const auto resumed = run(dir, -1, 555, in_fp16(&rec, &resumed_scale));
  EXPECT_EQ(rec.loaded_step, 10);
  expect_bit_identical(reference, resumed);
  ASSERT_TRUE(reference_scale && resumed_scale);
  EXPECT_EQ(*reference_scale, *resumed_scale);
  EXPECT_GT(resumed_scale->skipped_steps, 0);
  // The checkpoint holds the scale of its step, in its TrainerState.
  std::ifstream manifest(dir / "checkpoints" / "step-000000010" / "manifest.json");
  ASSERT_TRUE(manifest);
  const auto json = nlohmann::json::parse(manifest);
  EXPECT_TRUE(json.dump().find("\"loss_scale\"") != std::string::npos) << json.dump();
}

#else

TEST(SdkTrainerFp16, IsRefusedWhereLibtorchHasNoFloat16AutocastOnCpus) {
  torch::set_num_threads(1);
  elastic::WorkerContext ctx(elastic::WorkerIdentity{}, nullptr, testing::single_rank_communicator());
  TrainingArguments args = args_for(fresh_dir("fp16-refused"));
  args.fp16 = true;
  try {
    Trainer trainer(std::make_shared<Net>(), args, std::make_shared<Points>(), ctx);
    FAIL() << "fp16 on a CPU without float16 autocast was accepted";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("TrainingArguments.fp16"), std::string::npos) << what;
    EXPECT_NE(what.find("bf16 = true"), std::string::npos) << what;
  }
  EXPECT_FALSE(std::filesystem::exists(args.output_dir + "/checkpoints")) << "nothing was started";
}

#endif

}  // namespace
}  // namespace tenax::sdk
