#include "argument_changes.h"

#include <string>

#include <gtest/gtest.h>

namespace tenax::sdk {
namespace {

TrainingArguments base() {
  TrainingArguments a;
  a.output_dir = "runs/a";
  a.max_steps = 100;
  return a;
}

const ArgumentChange* find(const std::vector<ArgumentChange>& changes, const std::string& name) {
  for (const auto& c : changes) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(SdkArgumentChanges, SameArgumentsGiveNoChanges) { EXPECT_TRUE(diff_arguments(base().to_json(), base()).empty()); }

TEST(SdkArgumentChanges, BreakingChangesAreRefusedAllListed) {
  const TrainingArguments saved = base();
  TrainingArguments now = base();
  now.learning_rate = 3e-5;
  now.seed = 7;
  now.lr_scheduler_kwargs.power = 2.0;
  now.bf16 = true;
  now.max_steps = 200;
  now.logging_steps = 5;  // harmless, among them
  const auto changes = diff_arguments(saved.to_json(), now);
  ASSERT_EQ(changes.size(), 6u);
  EXPECT_TRUE(has_breaking(changes));
  EXPECT_EQ(find(changes, "logging_steps")->kind, ArgumentChangeKind::kHarmless);
  const std::string message = breaking_changes_message(changes, "runs/a/checkpoints/step-000000050");
  for (const char* name : {"learning_rate", "seed", "lr_scheduler_kwargs.power", "bf16", "max_steps"}) {
    EXPECT_EQ(find(changes, name)->kind, ArgumentChangeKind::kBreaking) << name;
    EXPECT_TRUE(contains(message, std::string("TrainingArguments.") + name +
                                      ": the checkpoint in "
                                      "runs/a/checkpoints/step-000000050 was trained with "))
        << name << "\n"
        << message;
  }
  EXPECT_TRUE(contains(message, "was trained with 5e-05, this run has 3e-05")) << message;
  EXPECT_TRUE(contains(message, "was trained with 42, this run has 7")) << message;
  EXPECT_FALSE(contains(message, "logging_steps")) << message;
  EXPECT_TRUE(contains(message, "resume with the recorded values or use another output_dir")) << message;
}

TEST(SdkArgumentChanges, HarmlessChangesAreNotRefused) {
  const TrainingArguments saved = base();
  TrainingArguments now = base();
  now.output_dir = "runs/moved";
  now.logging_steps = 1;
  now.save_steps = 7;
  now.eval_strategy = "steps";
  now.per_device_eval_batch_size = 1;
  now.report_to = {"none"};
  now.disable_tqdm = true;
  now.save_total_limit = 3;
  now.on_save_error = "stop";
  now.per_device_train_batch_size = 4;  // the Trainer keeps the global batch
  now.gradient_accumulation_steps = 2;
  const auto changes = diff_arguments(saved.to_json(), now);
  EXPECT_EQ(changes.size(), 11u);
  EXPECT_FALSE(has_breaking(changes));
  EXPECT_EQ(breaking_changes_message(changes, "dir"), "");
  const ArgumentChange* moved = find(changes, "output_dir");
  ASSERT_NE(moved, nullptr);
  EXPECT_EQ(describe(*moved),
            "TrainingArguments.output_dir: \"runs/a\" in the checkpoint, \"runs/moved\" now (where files go)");
}

TEST(SdkArgumentChanges, UnusedOverriddenFieldsAreHarmless) {
  TrainingArguments saved = base();
  TrainingArguments now = base();
  now.num_train_epochs = 5;  // max_steps = 100 in both: unused
  saved.warmup_steps = now.warmup_steps = 10;
  now.warmup_ratio = 0.5;  // unused: warmup_steps > 0 in both
  auto changes = diff_arguments(saved.to_json(), now);
  EXPECT_FALSE(has_breaking(changes)) << breaking_changes_message(changes, "dir");
  EXPECT_EQ(changes.size(), 2u);

  saved.max_steps = now.max_steps = -1;  // now the epochs define the schedule
  changes = diff_arguments(saved.to_json(), now);
  ASSERT_NE(find(changes, "num_train_epochs"), nullptr);
  EXPECT_EQ(find(changes, "num_train_epochs")->kind, ArgumentChangeKind::kBreaking);
}

TEST(SdkArgumentChanges, KeysOnlyOneSideKnowsAreToleratedNotes) {
  nlohmann::json saved = base().to_json();
  saved["a_key_of_a_newer_build"] = true;   // from a newer build
  saved.erase("save_async");                // from an older build
  saved["learning_rate"] = "not a number";  // odd, but no crash: a breaking change
  std::vector<ArgumentChange> changes;
  ASSERT_NO_THROW(changes = diff_arguments(saved, base()));
  ASSERT_EQ(changes.size(), 3u);
  const ArgumentChange* newer = find(changes, "a_key_of_a_newer_build");
  ASSERT_NE(newer, nullptr);
  EXPECT_EQ(newer->kind, ArgumentChangeKind::kHarmless);
  EXPECT_TRUE(newer->current.is_null());
  EXPECT_TRUE(contains(describe(*newer), "a_key_of_a_newer_build: true in the checkpoint, unknown to this build"));
  const ArgumentChange* older = find(changes, "save_async");
  ASSERT_NE(older, nullptr);
  EXPECT_EQ(older->kind, ArgumentChangeKind::kHarmless);
  EXPECT_TRUE(older->recorded.is_null());
  EXPECT_EQ(find(changes, "learning_rate")->kind, ArgumentChangeKind::kBreaking);

  EXPECT_TRUE(diff_arguments(nlohmann::json::object(), base()).empty()) << "nothing recorded: nothing to compare";
  EXPECT_TRUE(diff_arguments(nlohmann::json(), base()).empty());
  EXPECT_TRUE(diff_arguments(nlohmann::json::array({1, 2}), base()).empty());
}

TEST(SdkArgumentChanges, EveryFieldIsClassified) {
  // A field added to TrainingArguments needs a decision here (argument_changes.cpp's table).
  TrainingArguments a;
  for_each_field(a, [](const char* name, const auto&) {
    EXPECT_TRUE(argument_change_kind(name).has_value()) << name << " has no breaking/harmless classification";
  });
  EXPECT_FALSE(argument_change_kind("no_such_field").has_value());
  EXPECT_TRUE(argument_change_kind("seed") == ArgumentChangeKind::kBreaking);
  EXPECT_TRUE(argument_change_kind("save_steps") == ArgumentChangeKind::kHarmless);
}

}  // namespace
}  // namespace tenax::sdk
