// The training state as one value (sdk/src/training_snapshot.h): TrainerState read back from
// its JSON, a heal's tensors read back on a receiver, the data position as skipped steps; and
// the Choice options of TrainingArguments (enums that take transformers' spellings).
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "training_snapshot.h"
#include "tenax/core/error.h"
#include "tenax/sdk/training_arguments.h"

namespace tenax::sdk {
namespace {

TEST(SdkTrainingSnapshot, TrainerStateReadsBackWhatItWrites) {
  const nlohmann::json saved = {
      {"global_step", 12},
      {"epoch", 1.5},
      {"max_steps", 40},
      {"num_train_epochs", 2},
      {"logging_steps", 5},
      {"eval_steps", 10},
      {"save_steps", 10},
      {"train_batch_size", 8},
      {"world_size", 3},
      {"generation", 2},
      {"log_history", {{{"loss", 0.5}}}},
      {"best_model_checkpoint", "out/checkpoints/step-000000010"},
      {"best_metric", 0.25},
      {"num_input_tokens_seen", 123456789012},
      {"stateful_callbacks",
       {{"EarlyStoppingCallback",
         {{"args", {{"early_stopping_patience", 3}}}, {"attributes", {{"early_stopping_patience_counter", 2}}}}}}}};
  const TrainerState state = TrainerState::from_json(saved);
  EXPECT_EQ(state.to_json(), saved);
  const TrainerState back = TrainerState::from_json(state.to_json());
  EXPECT_EQ(back.to_json(), state.to_json());

  const TrainerState older = TrainerState::from_json({{"global_step", 7}, {"best_metric", nullptr}});
  EXPECT_EQ(older.global_step, 7);
  EXPECT_FALSE(older.best_metric);
  EXPECT_TRUE(older.log_history.empty());
}

TEST(SdkTrainingSnapshot, HealTensorsReadBackOnTheReceiver) {
  detail::TrainingSnapshot sent;
  sent.model = {{"model/w", torch::arange(6, torch::kFloat32)}, {"optim/w/step", torch::tensor(3, torch::kInt64)}};
  sent.data_order = detail::SavedDataOrder{42, {1, 16}, 8};
  sent.rng = {{detail::kRngMirrorsName, torch::ones({2, 4}, torch::kUInt8)}};
  sent.trainer_state.global_step = 9;
  sent.trainer_state.epoch = 1.25;
  const detail::PeerSnapshot got = detail::snapshot_from_peer(detail::to_peer_tensors(sent, 5));
  EXPECT_EQ(got.last_committed, 5);
  EXPECT_EQ(got.snapshot.trainer_state.to_json(), sent.trainer_state.to_json());
  ASSERT_TRUE(got.snapshot.data_order);
  EXPECT_EQ(got.snapshot.data_order->seed, 42u);
  EXPECT_EQ(got.snapshot.data_order->position.cursor, 16);
  const auto lookup = got.snapshot.lookup();
  EXPECT_TRUE(torch::equal(lookup("model/w"), torch::arange(6, torch::kFloat32)));
  EXPECT_EQ(lookup("optim/w/step").item<std::int64_t>(), 3);
  EXPECT_TRUE(torch::equal(lookup(detail::kRngMirrorsName), torch::ones({2, 4}, torch::kUInt8)));
  EXPECT_FALSE(lookup("model/absent").defined());
}

TEST(SdkTrainingSnapshot, DataPositionGivesTheStepsEpochStopSkipped) {
  // Step 9 of a run with 10 steps per epoch whose first epoch stopped after 6 steps: it trains on
  // global batch 13 (epoch 1, third batch), 4 ahead of its step.
  const detail::SavedDataOrder order{42, {1, 3 * 8}, 8};
  EXPECT_EQ(order.skipped_steps(10, 9), 4);
  EXPECT_TRUE(torch::equal(detail::SavedDataOrder::from_tensor(order.to_tensor())->to_tensor(), order.to_tensor()));
  EXPECT_FALSE(detail::SavedDataOrder::from_tensor(torch::zeros({3}, torch::kInt64)));
}

TEST(SdkChoice, TakesTheEnumOrItsSpellingAndNamesAnUnknownOne) {
  TrainingArguments args;
  args.output_dir = "unused";
  args.eval_strategy = "steps";
  EXPECT_TRUE(args.eval_strategy == IntervalStrategy::kSteps);
  args.eval_strategy = IntervalStrategy::kEpoch;
  EXPECT_EQ(args.eval_strategy.name(), "epoch");
  EXPECT_EQ(args.to_json().at("eval_strategy"), "epoch");
  args.on_save_error = "retry";
  EXPECT_FALSE(args.on_save_error.valid());
  EXPECT_EQ(args.on_save_error.name(), "retry");
  try {
    args.validate();
    ADD_FAILURE() << "on_save_error = retry accepted";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "TrainingArguments.on_save_error: 'retry' is not one of: continue, stop");
  }
}

}  // namespace
}  // namespace tenax::sdk
