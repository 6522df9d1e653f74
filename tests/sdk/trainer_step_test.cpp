// The step-at-a-time surface: train() is a loop over step(), so a caller that drives begin() /
// step() / end() itself with the same batches ends bit-identical to train(); an embedding caller
// (no dataset: a simulation supplying its batches) labels its checkpoints with its own step and
// resumes bit-exactly with its registered state. Plus the pure run plan and step flow.
#include "tenax/sdk/trainer.h"

#include <filesystem>
#include <limits>

#include <torch/torch.h>

#include <gtest/gtest.h>

#include "run_plan.h"
#include "step_flow.h"
#include "support/temp_dir.h"
#include "support/thread_ranks.h"
#include "tenax/core/error.h"
#include "tenax/sdk/sampler.h"

namespace tenax::sdk {
namespace {

class Points final : public Dataset {
 public:
  Points() {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(99);
    x_ = at::randn({128, 4}, gen);
    y_ = x_.sum(1, true).sin();
  }
  std::int64_t size() const override { return x_.size(0); }
  Example get(std::int64_t i) const override { return {x_[i], y_[i]}; }
  Batch batch(const std::vector<std::int64_t>& indices) const {
    Batch b;
    auto idx = torch::tensor(indices, torch::kInt64);
    b.inputs = x_.index_select(0, idx);
    b.labels = y_.index_select(0, idx);
    return b;
  }

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
    if (batch.labels.defined()) out.loss = torch::mse_loss(out.logits, batch.labels);
    return out;
  }

 private:
  torch::nn::Linear a_, b_;
};

TrainingArguments args_for(const std::filesystem::path& dir) {
  TrainingArguments a;
  a.output_dir = dir.string();
  a.max_steps = 20;
  a.save_steps = 0;
  a.logging_steps = 5;
  a.per_device_train_batch_size = 8;
  a.learning_rate = 1e-2;
  a.warmup_steps = 3;
  a.seed = 1234;
  return a;
}

std::filesystem::path fresh_dir(const std::string& name) { return tenax::testing::fresh_path("step", name); }

std::vector<torch::Tensor> snapshot(Model& model) {
  std::vector<torch::Tensor> out;
  for (auto& p : model.parameters()) out.push_back(p.detach().clone());
  return out;
}

void expect_bit_identical(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << "parameter " << i;
}

elastic::WorkerContext single_context() {
  return elastic::WorkerContext(elastic::WorkerIdentity{}, nullptr, testing::single_rank_communicator());
}

TEST(SdkTrainerStep, ALoopOverStepWithTheSamplersBatchesEqualsTrain) {
  torch::set_num_threads(1);
  auto data = std::make_shared<Points>();
  std::vector<torch::Tensor> reference;
  {
    auto ctx = single_context();
    torch::manual_seed(7);
    auto model = std::make_shared<Net>();
    Trainer trainer(model, args_for(fresh_dir("train")), data, ctx);
    EXPECT_EQ(trainer.train().global_step, 20);
    reference = snapshot(*model);
  }
  auto ctx = single_context();
  torch::manual_seed(7);
  auto model = std::make_shared<Net>();
  Trainer trainer(model, args_for(fresh_dir("loop")), data, ctx);
  EXPECT_FALSE(trainer.begin(/*resume=*/true).has_value());
  ResumableSampler sampler(data->size(), 8, 1234);
  for (std::int64_t s = 0; s < 20; ++s) trainer.step({data->batch(sampler.rank_indices(s, 0, 1))});
  EXPECT_EQ(trainer.end().global_step, 20);
  expect_bit_identical(reference, snapshot(*model));
}

// A simulation's shape of use: no dataset, its own batches, a checkpoint labelled with its solver
// step carrying its field; killed (here: the Trainer dropped) and resumed by a fresh process.
struct Simulation {
  torch::Tensor field = torch::zeros({4, 4}, torch::kFloat64);
  Batch batch(std::int64_t solver_step) const {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<std::uint64_t>(1000 + solver_step));
    Batch b;
    b.inputs = at::randn({8, 4}, gen);
    b.labels = b.inputs.sum(1, true).cos();
    return b;
  }
};

std::vector<torch::Tensor> run_embedded(const std::filesystem::path& dir, std::int64_t stop_after,
                                        std::int64_t* resumed_label, double* field_sum) {
  torch::set_num_threads(1);
  auto ctx = single_context();
  torch::manual_seed(555);  // parameters come from rank 0's init or the checkpoint, never from here
  auto model = std::make_shared<Net>();
  TrainingArguments args = args_for(dir);
  args.max_steps = 0;         // the simulation decides when to stop
  args.save_strategy = "no";  // the simulation saves, labelled with its step
  Trainer trainer(model, args, nullptr, ctx);
  Simulation sim;
  UserState state;
  state.add_tensor("field", sim.field);
  trainer.set_user_state(state);
  const std::optional<std::int64_t> label = trainer.begin(/*resume=*/true);
  *resumed_label = label.value_or(-1);
  for (std::int64_t solver_step = label ? *label + 1 : 0; solver_step < 40; ++solver_step) {
    sim.field += 1.0 / static_cast<double>(solver_step + 1);  // the "solver"
    if (solver_step % 2 == 0) trainer.step({sim.batch(solver_step)});
    if (solver_step % 10 == 9) trainer.save_checkpoint(solver_step);
    if (solver_step == stop_after) return {};  // killed before any later save committed
  }
  trainer.wait_for_checkpoint();
  *field_sum = sim.field.sum().item<double>();
  return snapshot(*model);
}

TEST(SdkTrainerStep, AnEmbeddedRunLabelsCheckpointsWithItsStepAndResumesBitExactly) {
  std::int64_t label = 0;
  double reference_field = 0, resumed_field = 0;
  const auto reference = run_embedded(fresh_dir("emb-ref"), -1, &label, &reference_field);
  EXPECT_EQ(label, -1);
  const auto dir = fresh_dir("emb");
  run_embedded(dir, 25, &label, &resumed_field);
  const auto resumed = run_embedded(dir, -1, &label, &resumed_field);
  EXPECT_EQ(label, 19);  // the last checkpoint before the stop, by the solver's step
  EXPECT_EQ(resumed_field, reference_field);
  expect_bit_identical(reference, resumed);
}

TEST(SdkTrainerStep, AnEmbeddedTrainerRefusesToSaveOnItsOwnSchedule) {
  // Such a save would be named by the optimizer step among the caller's solver-step names.
  auto ctx = single_context();
  auto model = std::make_shared<Net>();
  TrainingArguments args = args_for(fresh_dir("own-schedule"));
  args.save_strategy = "steps";
  args.save_steps = 5;
  Trainer trainer(model, args, nullptr, ctx);
  try {
    trainer.begin(false);
    FAIL() << "an embedded trainer accepted save_strategy = steps";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("save_strategy"), std::string::npos) << e.what();
  }
}

TEST(SdkTrainerStep, MisuseIsAClearError) {
  auto ctx = single_context();
  auto model = std::make_shared<Net>();
  TrainingArguments args = args_for(fresh_dir("misuse"));
  args.save_strategy = "no";
  Trainer trainer(model, args, nullptr, ctx);
  EXPECT_THROW(trainer.step({}), std::logic_error);
  EXPECT_THROW(trainer.train(), ConfigError);  // train() needs a dataset
  trainer.begin(false);
  EXPECT_THROW(trainer.begin(false), std::logic_error);
  try {
    trainer.step({});
    FAIL() << "no error for a step without batches";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("gradient_accumulation_steps"), std::string::npos) << e.what();
  }
}

TEST(SdkTrainerStep, PredictBatchRunsInEvalModeAndRestoresTheMode) {
  auto ctx = single_context();
  auto model = std::make_shared<Net>();
  Trainer trainer(model, args_for(fresh_dir("predict")), nullptr, ctx);
  Batch b;
  b.inputs = torch::ones({3, 4});
  model->train();
  const auto first = trainer.predict_batch(b).logits;
  EXPECT_TRUE(model->is_training());
  EXPECT_TRUE(torch::equal(first, trainer.predict_batch(b).logits));  // no dropout in eval mode
  EXPECT_EQ(first.sizes(), (std::vector<std::int64_t>{3, 1}));
}

// The caller's values reach every callback at the caller's step; the Trainer's own state and
// flags are untouched (an embedding caller logs solver metrics between training steps).
TEST(SdkTrainerStep, LogHandsTheCallersValuesToEveryCallbackAtItsStep) {
  struct Seen final : TrainerCallback {
    std::vector<std::pair<std::int64_t, Logs>> logs;
    void on_log(const TrainingArguments&, TrainerState& state, TrainerControl& control, const Logs& l) override {
      logs.emplace_back(state.global_step, l);
      control.should_save = true;  // must not make the Trainer save
    }
  };
  auto ctx = single_context();
  auto model = std::make_shared<Net>();
  TrainingArguments args = args_for(fresh_dir("log"));
  args.report_to = {"none"};
  Trainer trainer(model, args, nullptr, ctx);
  auto seen = std::make_shared<Seen>();
  trainer.add_callback(seen);
  trainer.log({{"residual", 0.25}}, 1700);
  trainer.log({{"energy", 2.0}});
  ASSERT_EQ(seen->logs.size(), 2u);
  EXPECT_EQ(seen->logs[0].first, 1700);
  EXPECT_EQ(seen->logs[0].second.at("residual"), 0.25);
  EXPECT_EQ(seen->logs[1].first, 0) << "without a step: the optimizer step";
  EXPECT_EQ(trainer.state().global_step, 0);
  EXPECT_TRUE(trainer.state().log_history.empty());
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(args.output_dir) / "checkpoints"));
}

TEST(SdkRunPlan, AResizedWorldKeepsTheGlobalBatchThroughAccumulation) {
  TrainingArguments a;
  a.per_device_train_batch_size = 4;
  a.max_steps = 100;
  const detail::RunPlan plan = detail::plan_run(a, 2, 64, 16, "out");
  EXPECT_EQ(plan.accumulation_steps, 2);
  EXPECT_EQ(plan.global_batch, 16);
  EXPECT_EQ(plan.steps_per_epoch, 4);
  EXPECT_EQ(plan.accumulation_changed_from, 1);
  EXPECT_THROW(detail::plan_run(a, 3, 64, 16, "out"), ConfigError);  // 12 does not divide 16
}

TEST(SdkRunPlan, EpochsDecideTheLengthWithoutMaxSteps) {
  TrainingArguments a;
  a.per_device_train_batch_size = 10;
  a.num_train_epochs = 2.5;
  const detail::RunPlan plan = detail::plan_run(a, 1, 95, std::nullopt, "out");
  EXPECT_EQ(plan.steps_per_epoch, 9);
  EXPECT_EQ(plan.max_steps, 23);
  EXPECT_EQ(plan.data_step_limit, 23);
  EXPECT_EQ(plan.num_train_epochs, 3);
  EXPECT_THROW(detail::plan_run(a, 1, 9, std::nullopt, "out"), ConfigError);  // less than one batch
}

TEST(SdkRunPlan, WithoutADatasetThereAreNoEpochs) {
  TrainingArguments a;
  a.max_steps = 0;
  a.save_strategy = "no";
  const detail::RunPlan plan = detail::plan_run(a, 4, std::nullopt, std::nullopt, "out");
  EXPECT_FALSE(plan.has_dataset);
  EXPECT_EQ(plan.max_steps, detail::kUnboundedSteps);
  EXPECT_EQ(plan.data_step_limit, std::numeric_limits<std::int64_t>::max());
  a.logging_strategy = "epoch";
  EXPECT_THROW(detail::plan_run(a, 4, std::nullopt, std::nullopt, "out"), ConfigError);
}

TEST(SdkStepFlow, StrategiesRaiseTheirFlagsAtTheirSteps) {
  TrainingArguments a;
  a.per_device_train_batch_size = 10;
  a.max_steps = 25;
  a.logging_steps = 5;
  a.eval_strategy = "epoch";
  a.save_strategy = "steps";
  const detail::RunPlan plan = detail::plan_run(a, 1, 100, std::nullopt, "out");
  auto at = [&](std::int64_t step) { return detail::flow_after_step(plan, 5, 20, step, step - 1); };
  EXPECT_TRUE(at(5).log);
  EXPECT_FALSE(at(6).log);
  EXPECT_TRUE(at(10).epoch_end && at(10).evaluate);
  EXPECT_FALSE(at(11).evaluate);
  EXPECT_TRUE(at(20).save);
  EXPECT_TRUE(at(25).last_step && at(25).log);  // the last step always logs
  EXPECT_FALSE(at(25).save);                    // end() saves the last step, not the strategy
  EXPECT_THROW(detail::parse_interval_strategy("step", "save_strategy"), ConfigError);
}

}  // namespace
}  // namespace tenax::sdk
