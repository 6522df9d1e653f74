// optim = "sgd" and "adafactor" as transformers' Trainer runs them, replayed with libtorch: the
// tiny model, initial weights, inputs and per-step parameters of
// tests/sdk/goldens/optimizer_goldens.json (written by tools/goldens/schedule_goldens.py with the
// optimizer transformers' Trainer.get_optimizer_cls_and_kwargs builds, its two parameter groups,
// get_scheduler("linear") and clip_grad_norm_), against create_optimizer_for, LrSchedule and
// clip_grad_norm_; also across a capture and restore of the optimizer state halfway.
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "tenax/core/error.h"
#include "tenax/sdk/adafactor.h"
#include "tenax/sdk/lr_schedule.h"
#include "tenax/sdk/optimizer_groups.h"
#include "tenax/sdk/state_capture.h"
#include "tiny_net_goldens.h"

namespace tenax::sdk {
namespace {

const nlohmann::json& goldens() {
  static const nlohmann::json g = [] {
    const std::string path = std::string(TENAX_SDK_GOLDENS_DIR) + "/optimizer_goldens.json";
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open " + path);
    return nlohmann::json::parse(in);
  }();
  return g;
}

using golden_replay::TinyNet;

/// One replay of `optim`'s goldens through the Trainer's own create_optimizer_for.
class OptimReplay : public golden_replay::Replay {
 public:
  explicit OptimReplay(const std::string& optim)
      : Replay(goldens().at("replays").at(optim),
               [optim](TinyNet& model) {
                 const nlohmann::json& c = goldens().at("replays").at(optim).at("config");
                 TrainingArguments args;
                 args.optim = optim;
                 args.learning_rate = c.at("lr").get<double>();
                 args.weight_decay = c.at("weight_decay").get<double>();
                 args.adam_beta1 = c.at("betas")[0].get<double>();
                 args.adam_beta2 = c.at("betas")[1].get<double>();
                 args.adam_epsilon = c.at("eps").get<double>();
                 return create_optimizer_for(model, args);
               }),
        g_(goldens().at("replays").at(optim)) {}

  void step(std::int64_t step) {
    Replay::step(step);
    EXPECT_NEAR(loss(), g_.at("steps")[static_cast<std::size_t>(step)].at("loss").get<double>(), 1e-6)
        << "step " << step;
  }
  void expect_parameters_after(std::int64_t step) const { Replay::expect_parameters_after(step, 2e-6); }
  const nlohmann::json& goldens_of_run() const { return g_; }

 private:
  const nlohmann::json& g_;
};

class SdkOptimizerGoldens : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { torch::set_num_threads(1); }
};

TEST_P(SdkOptimizerGoldens, TenStepsWithScheduleAndClippingEqualTransformers) {
  OptimReplay replay(GetParam());
  const std::string expected_class = GetParam() == "sgd" ? "SGD" : "Adafactor";
  ASSERT_EQ(replay.goldens_of_run().at("optimizer"), expected_class);
  EXPECT_STREQ(checkpointable_optimizer_name(replay.optimizer()), expected_class.c_str());
  for (std::int64_t step = 0; step < replay.steps(); ++step) {
    replay.step(step);
    replay.expect_parameters_after(step);
  }
}

// A resume in the middle: parameters and optimizer state captured by name after 4 steps,
// restored into a fresh model and optimizer, which go on exactly as the goldens. The state
// keys are transformers' (less Adafactor's RMS, which each step recomputes before reading it;
// SGD without momentum has none).
TEST_P(SdkOptimizerGoldens, StateCapturedAndRestoredMidwayContinuesOnTheGoldens) {
  constexpr std::int64_t kResumeAt = 4;
  std::map<std::string, torch::Tensor> saved;
  {
    OptimReplay first(GetParam());
    for (std::int64_t step = 0; step < kResumeAt; ++step) first.step(step);
    saved = first.saved_state();
  }
  std::set<std::string> keys;
  for (const auto& [name, t] : saved) {
    if (name.rfind("optim/", 0) == 0) keys.insert(name.substr(name.rfind('/') + 1));
  }
  std::set<std::string> expected_keys;
  for (const auto& key : goldens().at("replays").at(GetParam()).at("state_keys")) {
    if (GetParam() != "sgd") expected_keys.insert(key.get<std::string>());  // SGD's momentum_buffer is None
  }
  EXPECT_EQ(keys, expected_keys);

  OptimReplay second(GetParam());
  second.restore(saved);
  for (std::int64_t step = kResumeAt; step < second.steps(); ++step) {
    second.step(step);
    second.expect_parameters_after(step);
  }
}

INSTANTIATE_TEST_SUITE_P(TransformersOptim, SdkOptimizerGoldens, ::testing::Values("sgd", "adafactor"));

// Adafactor's state of a parameter saved with the wrong shape, or missing its factored
// moments (another optimizer's checkpoint), is refused naming the parameter and the key.
TEST(SdkAdafactorState, MisshapenOrMissingFactoredStateIsRefusedNamingTheParameter) {
  auto linear = torch::nn::Linear(3, 2);
  Adafactor optimizer(linear->parameters(), AdafactorOptions(1e-2).relative_step(false));
  NamedTensors params;
  for (const auto& item : linear->named_parameters()) params.emplace_back(item.key(), item.value());
  const auto restore = [&](std::map<std::string, torch::Tensor> saved) {
    restore_optimizer_state(optimizer, params, [&](const std::string& name) {
      const auto it = saved.find(name);
      return it == saved.end() ? torch::Tensor() : it->second;
    });
  };
  try {
    restore({{"optim/weight/step", torch::tensor(3)},
             {"optim/weight/exp_avg_sq_row", torch::zeros({3})},
             {"optim/weight/exp_avg_sq_col", torch::zeros({3})}});
    ADD_FAILURE() << "a row of 3 for a [2, 3] weight was accepted";
  } catch (const StorageError& e) {
    EXPECT_NE(std::string(e.what()).find("'exp_avg_sq_row' of parameter 'weight'"), std::string::npos) << e.what();
  }
  try {
    restore({{"optim/weight/step", torch::tensor(3)}, {"optim/weight/exp_avg", torch::zeros({2, 3})}});
    ADD_FAILURE() << "AdamW-like state was accepted by Adafactor";
  } catch (const StorageError& e) {
    EXPECT_NE(std::string(e.what()).find("parameter 'weight'"), std::string::npos) << e.what();
  }
}

// transformers' refusals: a rate together with relative_step, warmup_init without it.
TEST(SdkAdafactorState, RefusesTransformersInvalidCombinations) {
  auto linear = torch::nn::Linear(3, 2);
  EXPECT_THROW(Adafactor(linear->parameters(), AdafactorOptions(1e-2)), ConfigError);
  EXPECT_THROW(Adafactor(linear->parameters(), AdafactorOptions(1e-2).relative_step(false).warmup_init(true)),
               ConfigError);
  EXPECT_NO_THROW(Adafactor(linear->parameters(), AdafactorOptions()));  // relative_step's own rate
}

}  // namespace
}  // namespace tenax::sdk
