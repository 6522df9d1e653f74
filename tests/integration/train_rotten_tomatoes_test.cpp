// The text workload end to end, small: `tenax run` starts 2 workers of `tenax train` with the
// shipped Rotten Tomatoes job (train/jobs/rotten_tomatoes.toml, make demo's), cut short: 256
// training texts, max_seq_length 32, 12 steps of 2 x 8, a checkpoint every 5. Rank 1 SIGKILLs
// itself after step 8 (run.fail_at_step, run.fail_rank: a real SIGKILL, no unwinding); the agent
// restarts the generation, which resumes from the step-5 checkpoint and finishes. Then
// transformers' results files hold the held-out figures, and the model that rank 0 saved in
// output_dir/model loads back with the SDK's class of its family, labelled with the data's
// labels, and holds the final checkpoint's weights byte for byte. Two models:
//  - all-MiniLM-L6-v2 (a BERT), the demo's;
//  - the tiny DistilBERT that transformers initialised (tests/sdk/models/goldens/distilbert_tiny),
//    whose head was made for 3 labels: model.ignore_mismatched_sizes makes it one for the data's 2.
// Needs the assets of tools/fetch_assets.sh (fails, never skips, without them).
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/example_job.h"
#include "support/module_checkpoint.h"
#include "tenax/sdk/models/bert.h"
#include "tenax/sdk/models/distilbert.h"
#include "tenax/storage/layout.h"

namespace fs = std::filesystem;

namespace {

constexpr int kMaxSteps = 12;

fs::path assets_dir() {
  const char* env = std::getenv("TENAX_ASSETS");
  return env != nullptr && *env != '\0' ? fs::path(env) : fs::path(TENAX_SOURCE_DIR) / ".assets";
}

fs::path data_dir() { return assets_dir() / "data" / "rotten_tomatoes"; }

fs::path work_dir() {
  static const fs::path dir = tenax::testing::fresh_work_dir("tenax-train-rotten-tomatoes");
  return dir;
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

fs::path final_checkpoint(const fs::path& dir) {
  return dir / "train" / "checkpoints" / tenax::storage::step_dir_name(kMaxSteps);
}

// `tenax run` with 2 workers of the shipped job on `model_dir`, rank 1 killed after step 8,
// resumed from step 5, finished at kMaxSteps: checks the job's exit, the restart and the results.
void run_killed_and_resumed_job(const fs::path& dir, const fs::path& model_dir, const std::string& extra_keys) {
  ASSERT_TRUE(fs::exists(data_dir() / "train.csv"))
      << "run `bash tools/fetch_assets.sh` first (assets under " << assets_dir() << ")";
  const std::string cmd =
      std::string(TENAX_BINARY) + " run --nproc-per-node 2 --max-restarts 2 --run-dir " + (dir / "run").string() +
      " -- " + TENAX_BINARY + " train " + TENAX_SOURCE_DIR +
      "/train/jobs/rotten_tomatoes.toml output_dir=" + (dir / "train").string() +
      " model.model_name_or_path=" + model_dir.string() + " data.train_file=" + (data_dir() / "train.csv").string() +
      " data.validation_file=" + (data_dir() / "validation.csv").string() +
      " data.test_file=" + (data_dir() / "test.csv").string() + " max_steps=" + std::to_string(kMaxSteps) +
      " data.max_seq_length=32 per_device_train_batch_size=8 per_device_eval_batch_size=32 learning_rate=1e-4"
      " save_steps=5 logging_steps=4 data.max_train_samples=256 data.max_eval_samples=96"
      " data.max_predict_samples=96 run.threads=1 run.fail_at_step=8 run.fail_rank=1" +
      extra_keys;
  const tenax::testing::JobRun r = tenax::testing::run_job(cmd, dir);
  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_NE(r.log.find("worker rank 1"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("was killed by signal 9 (SIGKILL)"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find(tenax::storage::step_dir_name(5) + " at step 5:"), std::string::npos)
      << "resumed from the step-5 checkpoint\n"
      << r.log;
  EXPECT_EQ(r.agent["restarts"], 1) << r.agent.dump();

  const fs::path out = dir / "train";
  const nlohmann::json state = read_json(out / "trainer_state.json");
  EXPECT_EQ(state["global_step"], kMaxSteps) << state.dump();
  EXPECT_EQ(state["world_size"], 2) << state.dump();
  // Both ranks of the restarted generation wrote the final checkpoint: one shard each.
  EXPECT_TRUE(fs::exists(final_checkpoint(dir) / "shard-00000-of-00002.h5"));
  EXPECT_TRUE(fs::exists(final_checkpoint(dir) / "shard-00001-of-00002.h5"));
  const nlohmann::json all = read_json(out / "all_results.json");
  ASSERT_TRUE(all.is_object()) << "no " << (out / "all_results.json");
  for (const char* key : {"test_accuracy", "test_f1", "test_matthews_correlation", "eval_accuracy"}) {
    ASSERT_TRUE(all.contains(key) && all[key].is_number()) << key << " in " << all.dump();
    EXPECT_GE(all[key].get<double>(), -1.0) << key;
    EXPECT_LE(all[key].get<double>(), 1.0) << key;
  }
  for (const char* key : {"test_accuracy", "test_f1", "eval_accuracy"}) EXPECT_GE(all[key].get<double>(), 0.0) << key;
  for (const char* key : {"train_samples_per_second", "train_runtime", "test_runtime"}) {
    ASSERT_TRUE(all.contains(key) && all[key].is_number()) << key << " in " << all.dump();
    EXPECT_GT(all[key].get<double>(), 0.0) << key;
  }
  EXPECT_EQ(read_json(out / "test_results.json")["test_accuracy"], all["test_accuracy"]);
}

// The saved model is the trained one: its labels are the data's (sorted: fresh, rotten) and its
// weights equal the final checkpoint's, byte for byte.
void expect_saved_model_is_final_checkpoint(const tenax::sdk::PretrainedModel& model, const fs::path& dir) {
  EXPECT_TRUE(model.loading_info().missing_keys.empty());
  EXPECT_TRUE(model.loading_info().unexpected_keys.empty());
  const auto& id2label = model.pretrained_config().id2label;
  ASSERT_EQ(id2label.size(), 2u);
  EXPECT_EQ(id2label.at(0), "fresh");
  EXPECT_EQ(id2label.at(1), "rotten");
  EXPECT_TRUE(fs::exists(dir / "train" / "model" / "vocab.txt"));
  const int compared = tenax::testing::expect_parameters_equal_checkpoint(model, final_checkpoint(dir));
  EXPECT_GT(compared, 0);
  EXPECT_EQ(compared, static_cast<int>(model.parameters().size()));
}

TEST(IntegrationTrainRottenTomatoes, KilledRankResumesFinishesAndSavesALoadableBertModel) {
  ASSERT_TRUE(fs::exists(assets_dir() / "all-minilm-l6-v2" / "model.safetensors"))
      << "run `bash tools/fetch_assets.sh` first (assets under " << assets_dir() << ")";
  const fs::path dir = work_dir() / "bert";
  run_killed_and_resumed_job(dir, assets_dir() / "all-minilm-l6-v2", "");
  if (HasFatalFailure()) return;
  auto model = tenax::sdk::BertForSequenceClassification::from_pretrained(dir / "train" / "model");
  expect_saved_model_is_final_checkpoint(*model, dir);
}

// DistilBERT through the same job: the family comes from config.json, model.model_type checks it.
TEST(IntegrationTrainRottenTomatoes, DistilBertKilledRankResumesFinishesAndSavesALoadableModel) {
  const fs::path tiny = fs::path(TENAX_SOURCE_DIR) / "tests" / "sdk" / "models" / "goldens" / "distilbert_tiny";
  const fs::path dir = work_dir() / "distilbert";
  // The tiny model's head was made for 3 labels, the data has 2: transformers' ignore_mismatched_sizes.
  run_killed_and_resumed_job(dir, tiny, " model.model_type=distilbert model.ignore_mismatched_sizes=true");
  if (HasFatalFailure()) return;
  auto model = tenax::sdk::DistilBertForSequenceClassification::from_pretrained(dir / "train" / "model");
  expect_saved_model_is_final_checkpoint(*model, dir);
}

}  // namespace
