// examples/finetune_text end to end, small: `tenax run` starts 2 workers that fine-tune
// all-MiniLM-L6-v2 on a slice of Rotten Tomatoes (max_length 32, 12 steps); rank 1 SIGKILLs
// itself after step 8; the agent restarts the generation, which resumes from the step-5
// checkpoint and finishes; rank 0 prints TENAX_RESULT and writes <output>/model, which loads
// back with BertForSequenceClassification::from_pretrained and holds the final checkpoint's
// weights. The same with --model-type distilbert and the tiny DistilBERT that transformers
// initialised (tests/sdk/models/goldens/distilbert_tiny): the saved model loads back with
// DistilBertForSequenceClassification::from_pretrained and holds the final checkpoint's weights.
// Needs the assets of tools/fetch_assets.sh (fails, never skips, without them). The
// configuration tests (bad config keys, the committed finetune.toml) stop before any asset is read.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/example_job.h"
#include "tenax/sdk/models/bert.h"
#include "tenax/sdk/models/distilbert.h"
#include "tenax/storage/checkpoint_reader.h"
#include "tenax/storage/layout.h"

namespace fs = std::filesystem;

namespace {

constexpr int kMaxSteps = 12;

fs::path assets_dir() {
  const char* env = std::getenv("TENAX_ASSETS");
  return env != nullptr && *env != '\0' ? fs::path(env) : fs::path(TENAX_SOURCE_DIR) / ".assets";
}

fs::path work_dir() {
  static const fs::path dir = tenax::testing::fresh_work_dir("tenax-finetune");
  return dir;
}

using tenax::testing::JobRun;
using tenax::testing::result_line;

// `tenax run` with 2 workers, rank 1 killed after step 8, resumed from step 5, finished at
// kMaxSteps: checks the job's exit, the restart and TENAX_RESULT.
void run_killed_and_resumed_job(const fs::path& dir, const fs::path& model_dir, const std::string& extra_flags) {
  ASSERT_TRUE(fs::exists(assets_dir() / "data" / "rotten_tomatoes" / "train.csv"))
      << "run `bash tools/fetch_assets.sh` first (assets under " << assets_dir() << ")";
  const std::string cmd =
      std::string(TENAX_BINARY) + " run --nproc-per-node 2 --max-restarts 2 --run-dir " + (dir / "run").string() +
      " -- " + FINETUNE_BINARY + " --output-dir " + (dir / "train").string() + " --model-dir " + model_dir.string() +
      " --data-dir " + (assets_dir() / "data" / "rotten_tomatoes").string() + " --max-steps " +
      std::to_string(kMaxSteps) +
      " --max-length 32 --per-device-train-batch-size 8 --per-device-eval-batch-size 32 --learning-rate 1e-4"
      " --save-steps 5 --logging-steps 4 --train-limit 256 --eval-limit 96 --threads 1"
      " --fail-at-step 8 --fail-rank 1" +
      extra_flags;
  const JobRun r = tenax::testing::run_job(cmd, dir);
  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_NE(r.log.find("SIGKILL"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("at step 5"), std::string::npos) << "resumed from the step-5 checkpoint\n" << r.log;
  std::ifstream agent_file(dir / "run" / "agent.json");
  const auto agent = nlohmann::json::parse(agent_file, nullptr, false);
  EXPECT_EQ(agent["restarts"], 1) << agent.dump();

  const nlohmann::json result = result_line(r.stdout_text);
  ASSERT_TRUE(result.is_object()) << r.stdout_text;
  EXPECT_EQ(result["global_step"], kMaxSteps);
  EXPECT_EQ(result["world_size"], 2);
  EXPECT_EQ(result["resumed_from_step"], 5);
  for (const char* key : {"test_accuracy", "test_f1"}) {
    ASSERT_TRUE(result[key].is_number()) << key;
    EXPECT_GE(result[key].get<double>(), 0.0) << key;
    EXPECT_LE(result[key].get<double>(), 1.0) << key;
  }
  for (const char* key : {"train_samples_per_second", "train_runtime_s", "eval_runtime_s"}) {
    ASSERT_TRUE(result[key].is_number()) << key;
    EXPECT_GT(result[key].get<double>(), 0.0) << key;
  }
}

// The saved model is the trained one: its labels are the data's and its weights equal the final
// checkpoint's, byte for byte.
void expect_saved_model_is_final_checkpoint(const tenax::sdk::PretrainedModel& model, const fs::path& dir) {
  const auto& id2label = model.pretrained_config().id2label;
  ASSERT_EQ(id2label.size(), 2u);
  EXPECT_EQ(id2label.at(0), "fresh");
  EXPECT_EQ(id2label.at(1), "rotten");
  EXPECT_TRUE(fs::exists(dir / "train" / "model" / "vocab.txt"));
  auto reader =
      tenax::storage::CheckpointReader::open(dir / "train" / "checkpoints" / tenax::storage::step_dir_name(kMaxSteps));
  ASSERT_TRUE(reader.is_ok()) << reader.status().to_string();
  int compared = 0;
  for (const auto& item : model.named_parameters()) {
    auto saved = reader.value().read("model/" + item.key());
    ASSERT_TRUE(saved.is_ok()) << item.key() << ": " << saved.status().to_string();
    const torch::Tensor p = item.value().contiguous();
    ASSERT_EQ(saved.value().bytes.size(), static_cast<std::size_t>(p.nbytes())) << item.key();
    EXPECT_EQ(std::memcmp(saved.value().bytes.data(), p.data_ptr(), p.nbytes()), 0) << item.key() << " differs";
    ++compared;
  }
  EXPECT_EQ(compared, static_cast<int>(model.parameters().size()));
}

TEST(IntegrationFinetuneText, KilledRankResumesFinishesAndSavesALoadableModel) {
  ASSERT_TRUE(fs::exists(assets_dir() / "all-minilm-l6-v2" / "model.safetensors"))
      << "run `bash tools/fetch_assets.sh` first (assets under " << assets_dir() << ")";
  const fs::path dir = work_dir() / "kill";
  run_killed_and_resumed_job(dir, assets_dir() / "all-minilm-l6-v2", "");
  if (HasFatalFailure()) return;
  auto model = tenax::sdk::BertForSequenceClassification::from_pretrained(dir / "train" / "model");
  expect_saved_model_is_final_checkpoint(*model, dir);
}

// DistilBERT through the same example: the family comes from config.json, --model-type checks it.
TEST(IntegrationFinetuneText, DistilBertKilledRankResumesFinishesAndSavesALoadableModel) {
  const fs::path tiny = fs::path(TENAX_SOURCE_DIR) / "tests" / "sdk" / "models" / "goldens" / "distilbert_tiny";
  const fs::path dir = work_dir() / "kill-distilbert";
  // The tiny model's head was made for 3 labels, the data has 2: transformers' ignore_mismatched_sizes.
  run_killed_and_resumed_job(dir, tiny, " --model-type distilbert --ignore-mismatched-sizes true");
  if (HasFatalFailure()) return;
  auto model = tenax::sdk::DistilBertForSequenceClassification::from_pretrained(dir / "train" / "model");
  EXPECT_TRUE(model->loading_info().missing_keys.empty());
  EXPECT_TRUE(model->loading_info().unexpected_keys.empty());
  expect_saved_model_is_final_checkpoint(*model, dir);
}

TEST(IntegrationFinetuneText, ModelTypeThatConfigJsonDoesNotNameIsAUsageError) {
  const fs::path tiny = fs::path(TENAX_SOURCE_DIR) / "tests" / "sdk" / "models" / "goldens" / "distilbert_tiny";
  const fs::path dir = work_dir() / "wrong-type";
  fs::create_directories(dir / "data");
  for (const char* split : {"train.csv", "validation.csv", "test.csv"}) {
    std::ofstream(dir / "data" / split) << "text,label\na fine film,fresh\n";
  }
  JobRun r = tenax::testing::run_job(std::string(FINETUNE_BINARY) + " --output-dir " + (dir / "train").string() +
                                         " --model-dir " + tiny.string() + " --data-dir " + (dir / "data").string() +
                                         " --model-type bert",
                                     dir);
  EXPECT_EQ(r.exit_code, 2) << r.log;
  EXPECT_NE(r.log.find("is a \"distilbert\" model"), std::string::npos) << r.log;
  r = tenax::testing::run_job(
      std::string(FINETUNE_BINARY) + " --output-dir " + (dir / "train").string() + " --model-type gpt2", dir);
  EXPECT_EQ(r.exit_code, 2) << r.log;
  EXPECT_NE(r.log.find("finetune.model_type: must be one of auto, bert, distilbert (the text families), got 'gpt2'"),
            std::string::npos)
      << r.log;
}

TEST(IntegrationFinetuneText, MissingAssetsAreAUsageErrorThatSaysHowToFetchThem) {
  const fs::path dir = work_dir() / "no-assets";
  const JobRun r = tenax::testing::run_job(std::string(FINETUNE_BINARY) + " --output-dir " + (dir / "train").string() +
                                               " --model-dir " + (dir / "nowhere").string(),
                                           dir);
  EXPECT_EQ(r.exit_code, 2) << r.log;
  EXPECT_NE(r.log.find("tools/fetch_assets.sh"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("--model-dir"), std::string::npos) << r.log;
}

TEST(IntegrationFinetuneText, BadFlagValueIsAUsageErrorNamingTheFlag) {
  const fs::path dir = work_dir() / "bad-flag";
  const JobRun r = tenax::testing::run_job(
      std::string(FINETUNE_BINARY) + " --output-dir " + (dir / "train").string() + " --max-length abc", dir);
  EXPECT_EQ(r.exit_code, 2) << r.log;
  EXPECT_NE(r.log.find("--max-length 'abc' is not an integer"), std::string::npos) << r.log;
}

// Config errors stop the program before it reads a model (no assets needed): exit 2, naming the
// key and where it is.
TEST(IntegrationFinetuneText, BadConfigKeyIsAUsageErrorNamingTheKey) {
  const fs::path dir = work_dir() / "bad-config";
  fs::create_directories(dir);
  std::ofstream(dir / "bad.toml") << "output_dir = \"" << (dir / "train").string() << "\"\n"
                                  << "learnin_rate = 1e-4\n";
  // --model-dir nowhere: should the key pass, the run stops at the assets check, not in training.
  JobRun r = tenax::testing::run_job(std::string(FINETUNE_BINARY) + " --config " + (dir / "bad.toml").string() +
                                         " --model-dir " + (dir / "nowhere").string(),
                                     dir);
  EXPECT_EQ(r.exit_code, 2) << r.log;
  EXPECT_NE(r.log.find("bad.toml:2: unknown key 'learnin_rate' (did you mean 'learning_rate'?)"), std::string::npos)
      << r.log;

  std::ofstream(dir / "bad-section.toml") << "output_dir = \"x\"\n[finetune]\nmax_length = 1000\n";
  r = tenax::testing::run_job(std::string(FINETUNE_BINARY) + " --config " + (dir / "bad-section.toml").string() +
                                  " --model-dir " + (dir / "nowhere").string(),
                              dir);
  EXPECT_EQ(r.exit_code, 2) << r.log;
  EXPECT_NE(r.log.find("finetune.max_length: must be in [3, 512]"), std::string::npos) << r.log;
  EXPECT_FALSE(fs::exists(dir / "train")) << "nothing was started";
}

// The committed config is the `make demo` job (tools/demo.sh); flags still override it, the
// example's older --epochs included.
TEST(IntegrationFinetuneText, CommittedConfigIsTheDemoJobAndFlagsOverrideIt) {
  const fs::path dir = work_dir() / "print-config";
  const std::string config = std::string(TENAX_SOURCE_DIR) + "/examples/finetune_text/finetune.toml";
  JobRun r = tenax::testing::run_job(std::string(FINETUNE_BINARY) + " --config " + config + " --print-config", dir);
  ASSERT_EQ(r.exit_code, 0) << r.log;
  for (const char* line :
       {"num_train_epochs = 1.0\n", "per_device_train_batch_size = 32\n", "per_device_eval_batch_size = 64\n",
        "learning_rate = 0.0001\n", "save_steps = 40\n", "save_total_limit = 2\n", "logging_steps = 10\n",
        "seed = 42\n", "[finetune]\n", "max_length = 64\n", "threads = 1\n"}) {
    EXPECT_NE(r.stdout_text.find(line), std::string::npos) << line << "\n" << r.stdout_text;
  }
  r = tenax::testing::run_job(std::string(FINETUNE_BINARY) + " --config " + config +
                                  " --print-config --epochs 2 --learning-rate=3e-5 --max-length 32",
                              dir);
  ASSERT_EQ(r.exit_code, 0) << r.log;
  for (const char* line : {"num_train_epochs = 2.0\n", "learning_rate = 3e-05\n", "max_length = 32\n"}) {
    EXPECT_NE(r.stdout_text.find(line), std::string::npos) << line << "\n" << r.stdout_text;
  }
}

}  // namespace
