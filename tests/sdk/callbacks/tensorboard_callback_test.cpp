// TensorBoardCallback: transformers' tags at the global step, evaluations written once, and
// nothing from other ranks.
#include "tenax/sdk/callbacks/tensorboard.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sdk/callbacks/callback_test_support.h"
#include "sdk/tensorboard_records.h"

namespace tenax::sdk {
namespace {

using testing::decode_scalar;
using testing::read_file;
using testing::records_of;
using testing::Scalar;
using testing::state_at;

class SdkTensorBoardCallback : public testing::CallbackDirTest {};

TEST_F(SdkTensorBoardCallback, CallbackWritesTransformersTagsAtTheGlobalStep) {
  TensorBoardCallback cb(dir_ / "runs");
  TrainingArguments args;
  TrainerControl control;
  TrainerState state = state_at(0);
  cb.on_train_begin(args, state, control);
  ASSERT_FALSE(cb.event_file().empty());
  state = state_at(5);
  cb.on_log(args, state, control, Logs{{"loss", 0.5}, {"learning_rate", 2e-5}, {"epoch", 0.5}, {"step", 5.0}});
  // Trainer::evaluate: on_log with epoch and step, then on_evaluate with the same metrics.
  cb.on_log(args, state, control, Logs{{"eval_loss", 0.25}, {"epoch", 0.5}, {"step", 5.0}});
  cb.on_evaluate(args, state, control, Logs{{"eval_loss", 0.25}});
  // on_evaluate alone (a hand-written loop), and predict-style metrics.
  state = state_at(7);
  cb.on_evaluate(args, state, control, Logs{{"eval_accuracy", 0.875}, {"test_f1", 0.5}});

  const auto records = records_of(read_file(cb.event_file()));
  std::vector<std::string> seen;
  for (std::size_t i = 1; i < records.size(); ++i) {
    const Scalar s = decode_scalar(records[i]);
    seen.push_back(s.tag + "@" + std::to_string(s.step) + "=" + std::to_string(s.value));
  }
  const std::vector<std::string> expected = {
      "train/epoch@5=0.500000",   "train/learning_rate@5=0.000020",
      "train/loss@5=0.500000",                             // on_log
      "train/epoch@5=0.500000",   "eval/loss@5=0.250000",  // evaluate
      "eval/accuracy@7=0.875000", "test/f1@7=0.500000",    // on_evaluate
  };
  EXPECT_EQ(seen, expected);
}

TEST_F(SdkTensorBoardCallback, OtherRanksWriteNothing) {
  TensorBoardCallback cb(dir_ / "runs");
  TrainingArguments args;
  TrainerControl control;
  TrainerState state = state_at(1, 10, /*rank=*/2);
  cb.on_train_begin(args, state, control);
  cb.on_log(args, state, control, Logs{{"loss", 0.5}});
  EXPECT_TRUE(cb.event_file().empty());
  EXPECT_FALSE(std::filesystem::exists(dir_ / "runs"));
}

}  // namespace
}  // namespace tenax::sdk
