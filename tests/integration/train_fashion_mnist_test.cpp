// The image workload end to end, small: `tenax run` starts 2 workers of `tenax train` with the
// shipped Fashion-MNIST job (train/jobs/fashion_mnist.toml, make demo-image's) on Debian's IDX
// files, cut short: a tiny ViT from a bare config.json written here, the first 768 training
// images, 12 steps of 2 x 32, a checkpoint every 5; once uninterrupted, once with rank 1
// SIGKILLing itself after step 8 (a real SIGKILL: the process dies without unwinding), once
// with rank 1 SIGKILLed by pid from the test. The agent restarts the generation, which resumes
// from the sharded step-5 checkpoint, and the final checkpoint's parameters equal, bit for bit,
// those of the uninterrupted run; the held-out accuracy is in test_results.json, and the model
// that rank 0 saves loads back (with its image processor) and holds the final checkpoint's weights.
// Needs Debian's dataset-fashion-mnist (tools/bootstrap.sh installs it; fails, never skips,
// without it).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/agent_process.h"
#include "support/eventually.h"
#include "support/example_job.h"
#include "support/model_checkpoints.h"
#include "support/module_checkpoint.h"
#include "tenax/sdk/models/vit.h"
#include "tenax/sdk/vision/vit_image_processor.h"
#include "tenax/storage/layout.h"

namespace fs = std::filesystem;

namespace {

constexpr int kMaxSteps = 12;
// The tiny ViT's parameters: embeddings (cls_token, position_embeddings, projection weight and
// bias) 4, 16 per layer, the final LayerNorm 2, the classifier 2.
constexpr int kLayers = 2;
constexpr int kModelTensors = 4 + 16 * kLayers + 2 + 2;
const fs::path kData = "/usr/share/datasets/fashion-mnist";

fs::path work_dir() {
  static const fs::path dir = tenax::testing::fresh_work_dir("tenax-train-fashion-mnist");
  return dir;
}

using tenax::testing::JobRun;

// A tiny ViT for 28 x 28 images as a user writes one: config.json and preprocessor_config.json
// (no resize), no weights, so `tenax train` builds it from the config.
fs::path tiny_vit() {
  static const fs::path dir = [] {
    const fs::path d = work_dir() / "tiny-vit";
    fs::create_directories(d);
    nlohmann::json config = {{"model_type", "vit"},
                             {"image_size", 28},
                             {"patch_size", 7},
                             {"encoder_stride", 7},
                             {"num_channels", 3},
                             {"hidden_size", 32},
                             {"num_hidden_layers", kLayers},
                             {"num_attention_heads", 2},
                             {"intermediate_size", 64},
                             {"hidden_dropout_prob", 0.0},
                             {"attention_probs_dropout_prob", 0.0}};
    std::ofstream(d / "config.json") << config.dump(2);
    nlohmann::json processor = {{"image_processor_type", "ViTImageProcessor"},
                                {"do_resize", false},
                                {"size", {{"height", 28}, {"width", 28}}},
                                {"do_rescale", true},
                                {"rescale_factor", 1.0 / 255},
                                {"do_normalize", true},
                                {"image_mean", {0.5, 0.5, 0.5}},
                                {"image_std", {0.5, 0.5, 0.5}}};
    std::ofstream(d / "preprocessor_config.json") << processor.dump(2);
    return d;
  }();
  return dir;
}

// The job's command line: `tenax run` with 2 workers of `tenax train` on a small slice.
std::vector<std::string> job_argv(const std::string& name, const std::string& extra_keys) {
  const fs::path dir = work_dir() / name;
  std::vector<std::string> argv = {TENAX_BINARY,
                                   "run",
                                   "--nproc-per-node",
                                   "2",
                                   "--max-restarts",
                                   "2",
                                   "--run-dir",
                                   (dir / "run").string(),
                                   "--",
                                   TENAX_BINARY,
                                   "train",
                                   std::string(TENAX_SOURCE_DIR) + "/train/jobs/fashion_mnist.toml",
                                   "output_dir=" + (dir / "train").string(),
                                   "model.model_name_or_path=" + tiny_vit().string(),
                                   "max_steps=" + std::to_string(kMaxSteps)};
  std::istringstream keys(
      "data.max_train_samples=768 data.max_eval_samples=200 data.max_predict_samples=200"
      " per_device_train_batch_size=32 per_device_eval_batch_size=100 learning_rate=1e-3 warmup_ratio=0.1"
      " save_steps=5 logging_steps=4 disable_tqdm=true " +
      extra_keys);
  for (std::string word; keys >> word;) argv.push_back(word);
  return argv;
}

JobRun run_job(const std::string& name, const std::string& extra_flags) {
  const fs::path dir = work_dir() / name;
  fs::remove_all(dir);
  std::string cmd;
  for (const auto& word : job_argv(name, extra_flags)) cmd += (cmd.empty() ? "" : " ") + word;
  return tenax::testing::run_job(cmd, dir);
}

// The state letter of /proc/<pid>/stat ('T': stopped), '?' when the process is gone.
char proc_state(pid_t pid) {
  const std::string stat = tenax::testing::read_text("/proc/" + std::to_string(pid) + "/stat");
  const auto close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() ? '?' : stat[close + 2];
}

// Whether /proc/<pid>/environ holds RANK=<rank>.
bool has_rank(pid_t pid, int rank) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  const std::string env =
      std::string(1, '\0') + std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return env.find(std::string("\0RANK=", 6) + std::to_string(rank) + '\0') != std::string::npos;
}

fs::path final_checkpoint(const std::string& name) {
  return work_dir() / name / "train" / "checkpoints" / tenax::storage::step_dir_name(kMaxSteps);
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

// transformers' results files: the held-out accuracy of the 200 test images, the last step.
void expect_results(const std::string& name) {
  const fs::path out = work_dir() / name / "train";
  const nlohmann::json test = read_json(out / "test_results.json");
  ASSERT_TRUE(test.contains("test_accuracy")) << test.dump();
  EXPECT_GE(test["test_accuracy"].get<double>(), 0.0);
  EXPECT_LE(test["test_accuracy"].get<double>(), 1.0);
  EXPECT_EQ(read_json(out / "trainer_state.json")["global_step"], kMaxSteps);
}

class IntegrationTrainFashionMnist : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (fs::exists(kData / "train-images-idx3-ubyte.gz")) reference_ = new JobRun(run_job("reference", ""));
  }
  static void TearDownTestSuite() {
    delete reference_;
    reference_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kData / "train-images-idx3-ubyte.gz"))
        << "install Debian's dataset-fashion-mnist (bash tools/bootstrap.sh does)";
  }
  static JobRun* reference_;
};
JobRun* IntegrationTrainFashionMnist::reference_ = nullptr;

TEST_F(IntegrationTrainFashionMnist, UninterruptedRunFinishesAndReportsHeldOutAccuracy) {
  ASSERT_EQ(reference_->exit_code, 0) << reference_->log;
  EXPECT_EQ(reference_->agent["restarts"], 0) << reference_->agent.dump();
  expect_results("reference");
  EXPECT_TRUE(fs::exists(final_checkpoint("reference") / "manifest.json"));
}

TEST_F(IntegrationTrainFashionMnist, KilledRankResumesFromTheShardedCheckpointBitIdentically) {
  ASSERT_EQ(reference_->exit_code, 0) << reference_->log;
  const JobRun r = run_job("kill", " run.fail_at_step=8 run.fail_rank=1");
  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_EQ(r.agent["restarts"], 1) << r.agent.dump();
  EXPECT_NE(r.log.find("was killed by signal 9 (SIGKILL)"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("at step 5"), std::string::npos) << "resumed from the step-5 checkpoint\n" << r.log;
  expect_results("kill");
  // The step-5 checkpoint the resume read was written by both ranks (a shard each).
  const fs::path step5 = work_dir() / "kill" / "train" / "checkpoints" / tenax::storage::step_dir_name(5);
  if (fs::exists(step5)) {  // save_total_limit may have pruned it by the end; the final one is sharded too
    EXPECT_TRUE(fs::exists(step5 / "shard-00001-of-00002.h5"));
  }
  EXPECT_TRUE(fs::exists(final_checkpoint("kill") / "shard-00000-of-00002.h5"));
  EXPECT_TRUE(fs::exists(final_checkpoint("kill") / "shard-00001-of-00002.h5"));
  tenax::testing::expect_bit_identical_models(final_checkpoint("reference"), final_checkpoint("kill"), kModelTensors);

  // The model rank 0 saved is the final checkpoint's, and loads back with its processor.
  const fs::path model_dir = work_dir() / "kill" / "train" / "model";
  auto model = tenax::sdk::ViTForImageClassification::from_pretrained(model_dir);
  EXPECT_TRUE(model->loading_info().missing_keys.empty());
  EXPECT_TRUE(model->loading_info().unexpected_keys.empty());
  EXPECT_EQ(model->config().id2label.at(9), "Ankle boot");
  const auto processor = tenax::sdk::ViTImageProcessor::from_pretrained(model_dir);
  EXPECT_FALSE(processor.do_resize);
  EXPECT_EQ(processor.height, 28);
  const int compared = tenax::testing::expect_parameters_equal_checkpoint(*model, final_checkpoint("kill"));
  EXPECT_EQ(compared, kModelTensors);
}

// The kill comes from outside, as an operator's `kill -9 PID` or the OOM killer's: rank 1 stops
// itself after step 8 (its step-5 checkpoint committed), the test finds it stopped among the
// agent's workers and SIGKILLs it by pid. No timing is involved: until the kill, rank 1 is
// stopped and rank 0 waits for it in the next step's allreduce.
TEST_F(IntegrationTrainFashionMnist, RankKilledByPidFromOutsideResumesBitIdentically) {
  ASSERT_EQ(reference_->exit_code, 0) << reference_->log;
  const std::string name = "kill-by-pid";
  fs::remove_all(work_dir() / name);
  fs::create_directories(work_dir() / name);
  tenax::testing::ChildProcess agent(job_argv(name, "run.fail_at_step=8 run.fail_rank=1 run.fail_signal=STOP"),
                                     work_dir() / name / "job.log");
  ASSERT_GT(agent.pid(), 0);
  pid_t victim = -1;
  ASSERT_TRUE(tenax::testing::eventually(
      [&] {
        for (pid_t child : agent.children()) {
          if (has_rank(child, 1) && proc_state(child) == 'T') victim = child;
        }
        return victim > 0;
      },
      std::chrono::seconds(120)))
      << "rank 1 never stopped itself\n"
      << agent.log();
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  const auto exit_code = agent.wait(std::chrono::seconds(300));
  ASSERT_TRUE(exit_code.has_value()) << "the job did not finish\n" << agent.log();
  const std::string log = agent.log();
  ASSERT_EQ(*exit_code, 0) << log;
  EXPECT_NE(log.find("worker rank 1 (pid " + std::to_string(victim)), std::string::npos) << log;
  EXPECT_NE(log.find("was killed by signal 9 (SIGKILL)"), std::string::npos) << log;
  EXPECT_NE(log.find("at step 5"), std::string::npos) << "resumed from the step-5 checkpoint\n" << log;
  std::ifstream agent_file(work_dir() / name / "run" / "agent.json");
  EXPECT_EQ(nlohmann::json::parse(agent_file, nullptr, false)["restarts"], 1);
  tenax::testing::expect_bit_identical_models(final_checkpoint("reference"), final_checkpoint(name), kModelTensors);
}

TEST(IntegrationTrainFashionMnistConfig, MissingDataOrAPatchSizeThatDoesNotDivideTheImageIsAUsageError) {
  const fs::path dir = work_dir() / "no-data";
  const std::string job = std::string(TENAX_BINARY) + " train " + TENAX_SOURCE_DIR +
                          "/train/jobs/fashion_mnist.toml output_dir=" + (dir / "train").string() +
                          " model.model_name_or_path=" + tiny_vit().string();
  const JobRun missing = tenax::testing::run_job(
      job + " data.train_file=" + (dir / "nowhere" / "train-images-idx3-ubyte.gz").string(), dir);
  EXPECT_EQ(missing.exit_code, 2) << missing.log;
  EXPECT_NE(missing.log.find((dir / "nowhere" / "train-images-idx3-ubyte.gz").string()), std::string::npos)
      << missing.log;
  const fs::path bad = work_dir() / "bad-patch-vit";
  fs::create_directories(bad);
  nlohmann::json config = read_json(tiny_vit() / "config.json");
  config["patch_size"] = 5;
  std::ofstream(bad / "config.json") << config.dump();
  fs::copy_file(tiny_vit() / "preprocessor_config.json", bad / "preprocessor_config.json",
                fs::copy_options::overwrite_existing);
  const JobRun patch = tenax::testing::run_job(
      job + " model.model_name_or_path=" + bad.string() + " data.max_train_samples=64 data.max_eval_samples=64", dir);
  EXPECT_EQ(patch.exit_code, 2) << patch.log;
  EXPECT_NE(patch.log.find("patch_size"), std::string::npos) << patch.log;
  EXPECT_FALSE(fs::exists(dir / "train" / "checkpoints")) << "a refused job wrote checkpoints";
}

}  // namespace
