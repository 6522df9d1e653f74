// `tenax train` end to end, as a user runs it: real processes, generated data files.
//  - each task on each text format (CSV, TSV, JSON Lines): single-label, pair, multi-label (JSON
//    arrays and a separator), regression — trains, evaluates, and writes transformers' results
//    files and a model whose config.json says what it learned; Parquet files (written with
//    Arrow's C++ writer) with integer and list labels;
//  - a job SIGKILLed by pid from outside at a random, printed step and rank resumes under
//    `tenax run` to a model bit-identical to an uninterrupted run's (restart and in-process);
//  - a preempted job exits 3 and its rerun resumes to the uninterrupted model;
//  - the CoLA job file (MCC, evaluation and save per epoch, best model loaded) on a generated TSV;
//  - an image folder (Fashion-MNIST exported by tools/idx_to_image_folder.py): a ViT fine-tuned
//    with augmentation, trained from a bare config.json, preempted and resumed exactly;
//  - the Fashion-MNIST job on IDX files, augmented, preempted and resumed exactly with batches
//    loaded ahead on threads (dataloader_num_workers);
//  - every bad input exits 2 before training, naming the key, file or row, and loses nothing; the
//    shipped job without the assets of tools/fetch_assets.sh says how to fetch them.
// The tiny DistilBERT of the goldens trains in milliseconds; the kill test uses the demo's
// all-MiniLM-L6-v2 (tools/fetch_assets.sh; fails, never skips, without it), whose steps are
// long enough to be hit.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/agent_process.h"
#include "support/example_job.h"
#include "support/parquet_file.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const fs::path kTinyModel = fs::path(TENAX_SOURCE_DIR) / "tests/sdk/models/goldens/distilbert_tiny";

fs::path assets_dir() {
  const char* env = std::getenv("TENAX_ASSETS");
  return env != nullptr && *env != '\0' ? fs::path(env) : fs::path(TENAX_SOURCE_DIR) / ".assets";
}

fs::path work_dir() {
  static const fs::path dir = tenax::testing::fresh_work_dir("tenax-train");
  return dir;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

json read_json(const fs::path& p) { return json::parse(slurp(p), nullptr, /*allow_exceptions=*/false); }

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

// Texts whose words carry the labels, so that a few steps learn something: deterministic.
struct Row {
  std::string text, pair, label;
  std::vector<std::string> tags;
  double score = 0;
};

std::vector<Row> rows(int n, unsigned seed) {
  const std::vector<std::string> good = {"good", "great", "fine", "lovely", "superb"};
  const std::vector<std::string> bad = {"bad", "awful", "poor", "dull", "boring"};
  const std::vector<std::string> tags = {"red", "green", "blue"};
  std::mt19937 rng(seed);
  std::vector<Row> out;
  for (int i = 0; i < n; ++i) {
    Row r;
    const bool positive = rng() % 2 == 0;
    for (int w = 0; w < 4; ++w) r.text += (w ? " " : "") + (positive ? good : bad)[rng() % 5];
    r.pair = positive ? "so it is" : "so it is not";
    r.label = positive ? "yes" : "no";
    for (const auto& t : tags) {
      if (rng() % 5 < 2) r.tags.push_back(t);
    }
    for (const auto& t : r.tags) r.text += " " + t;
    r.score = positive ? 4.0 + (rng() % 10) / 10.0 : 1.0 + (rng() % 10) / 10.0;
    out.push_back(r);
  }
  return out;
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

// Writes train and validation files of one task in one format; returns their paths.
std::pair<fs::path, fs::path> write_task(const fs::path& dir, const std::string& task, const std::string& format) {
  std::pair<fs::path, fs::path> files{dir / ("train." + format), dir / ("validation." + format)};
  for (const auto& [path, seed] : {std::pair{files.first, 1U}, std::pair{files.second, 2U}}) {
    std::string text;
    const char sep = format == "tsv" ? '\t' : ',';
    if (format != "jsonl") {
      text = task == "pair" ? std::string("premise") + sep + "hypothesis" + sep + "label\n"
                            : std::string("text") + sep + "label\n";
    }
    for (const Row& r : rows(seed == 1U ? 96 : 32, seed)) {
      std::string label = task == "multi"        ? join(r.tags, "|")
                          : task == "regression" ? std::to_string(r.score)
                                                 : r.label;
      if (format == "jsonl") {
        json o = {{"text", r.text}, {"label", label}};
        if (task == "pair") o = {{"premise", r.text}, {"hypothesis", r.pair}, {"label", r.label}};
        if (task == "multi") o["label"] = r.tags;
        if (task == "regression") o["label"] = r.score;
        text += o.dump() + "\n";
      } else {
        text += (task == "pair" ? r.text + sep + r.pair : r.text) + sep + label + "\n";
      }
    }
    write(path, text);
  }
  return files;
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// `tenax train` with the tiny model and a few steps; `keys` are KEY=VALUE words.
tenax::testing::JobRun train(const fs::path& dir, const std::vector<std::string>& keys) {
  std::string cmd = std::string(TENAX_BINARY) + " train max_steps=12 per_device_train_batch_size=8 learning_rate=1e-3" +
                    " save_steps=4 logging_steps=4 model.ignore_mismatched_sizes=true data.max_seq_length=16" +
                    " model.model_name_or_path=" + kTinyModel.string() + " output_dir=" + (dir / "out").string();
  for (const auto& k : keys) cmd += " " + quoted(k);
  return tenax::testing::run_job(cmd, dir);
}

struct TaskCase {
  std::string task, format;
  std::vector<std::string> keys;
  std::string problem_type;
  std::vector<std::string> metrics;
  std::vector<std::string> id2label;  // empty: regression's single output
};

TEST(TenaxTrain, EachTaskOnEachFormatTrainsEvaluatesAndWritesTransformersResults) {
  const std::vector<TaskCase> cases = {
      {"single",
       "csv",
       {"metrics.metric_name=accuracy,f1,precision,recall,matthews_correlation"},
       "single_label_classification",
       {"accuracy", "f1", "precision", "recall", "matthews_correlation"},
       {"no", "yes"}},
      {"single", "tsv", {}, "single_label_classification", {"accuracy"}, {"no", "yes"}},
      {"single", "jsonl", {"data.label_names=yes,no"}, "single_label_classification", {"accuracy"}, {"yes", "no"}},
      {"pair",
       "tsv",
       {"data.text_column_names=premise,hypothesis"},
       "single_label_classification",
       {"accuracy"},
       {"no", "yes"}},
      {"pair",
       "jsonl",
       {"data.text_column_names=premise,hypothesis", "metrics.metric_name=f1", "metrics.average=macro"},
       "single_label_classification",
       {"f1"},
       {"no", "yes"}},
      {"multi",
       "jsonl",
       {"metrics.metric_name=f1,accuracy"},
       "multi_label_classification",
       {"f1", "accuracy"},
       {"blue", "green", "red"}},
      {"multi", "csv", {"data.label_separator=|"}, "multi_label_classification", {"f1"}, {"blue", "green", "red"}},
      {"regression",
       "csv",
       {"metrics.metric_name=pearson,spearman,mse"},
       "regression",
       {"pearson", "spearman", "mse"},
       {}},
      {"regression", "jsonl", {}, "regression", {"mse"}, {}},
  };
  for (const TaskCase& c : cases) {
    SCOPED_TRACE(c.task + " " + c.format);
    const fs::path dir = work_dir() / ("task-" + c.task + "-" + c.format);
    const auto [train_file, validation_file] = write_task(dir, c.task, c.format);
    std::vector<std::string> keys = {
        "data.train_file=" + train_file.string(), "data.validation_file=" + validation_file.string(),
        "data.test_file=" + validation_file.string(), "eval_strategy=steps", "eval_steps=6"};
    keys.insert(keys.end(), c.keys.begin(), c.keys.end());
    const auto r = train(dir, keys);
    ASSERT_EQ(r.exit_code, 0) << r.log;

    const fs::path out = dir / "out";
    const json all = read_json(out / "all_results.json");
    ASSERT_TRUE(all.is_object()) << slurp(out / "all_results.json");
    for (const char* key : {"train_loss", "train_runtime", "train_samples_per_second", "eval_loss", "test_loss"}) {
      EXPECT_TRUE(all.contains(key)) << key << " in " << all.dump();
    }
    for (const auto& m : c.metrics) {
      for (const std::string prefix : {"eval_", "test_"}) {
        ASSERT_TRUE(all.contains(prefix + m)) << prefix + m << " in " << all.dump();
        EXPECT_TRUE(all[prefix + m].is_number()) << prefix + m;
      }
    }
    EXPECT_EQ(read_json(out / "eval_results.json").value("eval_loss", -1.0), all["eval_loss"].get<double>());
    EXPECT_TRUE(read_json(out / "train_results.json").contains("train_loss"));
    const json state = read_json(out / "trainer_state.json");
    ASSERT_TRUE(state.contains("log_history")) << state.dump();
    // Two evaluations during training (steps 6, 12), each in the log history with the metrics.
    int evaluations = 0;
    for (const auto& entry : state["log_history"]) evaluations += entry.contains("eval_" + c.metrics.front());
    EXPECT_EQ(evaluations, 2) << state.dump();
    EXPECT_EQ(state["global_step"], 12);

    const json config = read_json(out / "model" / "config.json");
    EXPECT_EQ(config["problem_type"], c.problem_type) << config.dump();
    const std::size_t outputs = c.id2label.empty() ? 1 : c.id2label.size();
    ASSERT_EQ(config["id2label"].size(), outputs) << config.dump();
    for (std::size_t i = 0; i < c.id2label.size(); ++i) {
      EXPECT_EQ(config["id2label"][std::to_string(i)], c.id2label[i]) << config.dump();
      EXPECT_EQ(config["label2id"][c.id2label[i]], static_cast<int>(i)) << config.dump();
    }
    EXPECT_TRUE(fs::is_regular_file(out / "model" / "model.safetensors"));
    EXPECT_TRUE(fs::is_regular_file(out / "model" / "vocab.txt"));
  }
}

// Parquet files written with Arrow's C++ writer (several row groups): integer labels train a
// classifier whose classes are "0" and "1", list<string> labels a multi-label one; a null label
// and a truncated file exit 2 naming the file and row.
TEST(TenaxTrain, ParquetFilesTrainEachLabelTypeAndBadOnesExitTwo) {
  const fs::path dir = work_dir() / "parquet";
  fs::create_directories(dir);
  for (const auto& [name, seed, n] : {std::tuple{"train", 1U, 96}, std::tuple{"validation", 2U, 32}}) {
    std::vector<std::optional<std::string>> texts;
    std::vector<std::optional<std::int64_t>> labels;
    std::vector<std::vector<std::string>> tags;
    for (const Row& r : rows(n, seed)) {
      texts.push_back(r.text);
      labels.push_back(r.label == "yes" ? 1 : 0);
      tags.push_back(r.tags);
    }
    tenax::testing::write_parquet((dir / (std::string(name) + ".parquet")).string(),
                                  {{"text", tenax::testing::strings(texts)}, {"label", tenax::testing::int64s(labels)}},
                                  /*row_group_size=*/40);
    tenax::testing::write_parquet(
        (dir / (std::string(name) + "_tags.parquet")).string(),
        {{"text", tenax::testing::strings(texts)}, {"tags", tenax::testing::string_lists(tags)}},
        /*row_group_size=*/40);
  }
  struct ParquetCase {
    std::string name, train, validation;
    std::vector<std::string> keys;
    std::string problem_type;
    std::vector<std::string> id2label;
  };
  const std::vector<ParquetCase> cases = {
      {"int64 labels", "train.parquet", "validation.parquet", {}, "single_label_classification", {"0", "1"}},
      {"list<string> labels",
       "train_tags.parquet",
       "validation_tags.parquet",
       {"data.label_column_name=tags"},
       "multi_label_classification",
       {"blue", "green", "red"}},
  };
  for (const ParquetCase& c : cases) {
    SCOPED_TRACE(c.name);
    const fs::path run = dir / ("run-" + fs::path(c.train).stem().string());
    std::vector<std::string> keys = {"data.train_file=" + (dir / c.train).string(),
                                     "data.validation_file=" + (dir / c.validation).string(), "eval_strategy=steps",
                                     "eval_steps=6"};
    keys.insert(keys.end(), c.keys.begin(), c.keys.end());
    const auto r = train(run, keys);
    ASSERT_EQ(r.exit_code, 0) << r.log;
    const json all = read_json(run / "out" / "all_results.json");
    EXPECT_TRUE(all.contains("eval_loss")) << all.dump();
    const json config = read_json(run / "out" / "model" / "config.json");
    EXPECT_EQ(config["problem_type"], c.problem_type) << config.dump();
    ASSERT_EQ(config["id2label"].size(), c.id2label.size()) << config.dump();
    for (std::size_t i = 0; i < c.id2label.size(); ++i) {
      EXPECT_EQ(config["id2label"][std::to_string(i)], c.id2label[i]) << config.dump();
    }
  }

  const fs::path nulls = dir / "nulls.parquet";
  tenax::testing::write_parquet(nulls.string(), {{"text", tenax::testing::strings({"good", "bad", "fine"})},
                                                 {"label", tenax::testing::int64s({1, 0, std::nullopt})}});
  const auto null_run = train(dir / "null-run", {"data.train_file=" + nulls.string()});
  EXPECT_EQ(null_run.exit_code, 2) << null_run.log;
  EXPECT_NE(null_run.log.find("nulls.parquet: row 3, column 'label': null"), std::string::npos) << null_run.log;

  const std::string whole = slurp(dir / "train.parquet");
  write(dir / "truncated.parquet", whole.substr(0, whole.size() / 2));
  const auto cut_run = train(dir / "cut-run", {"data.train_file=" + (dir / "truncated.parquet").string()});
  EXPECT_EQ(cut_run.exit_code, 2) << cut_run.log;
  EXPECT_NE(cut_run.log.find("truncated.parquet: not a readable Parquet file"), std::string::npos) << cut_run.log;
}

// The CoLA job file as shipped, on a CoLA-format TSV (sentence, label 0/1) with the tiny model.
TEST(TenaxTrain, TheColaJobEvaluatesAndSavesEachEpochAndLoadsTheBestModelByMcc) {
  const fs::path dir = work_dir() / "cola";
  std::string tsv = "source\tlabel\toriginal_label\tsentence\n";
  std::string dev = tsv;
  for (const Row& r : rows(96, 3)) tsv += "gj04\t" + std::string(r.label == "yes" ? "1" : "0") + "\t\t" + r.text + "\n";
  for (const Row& r : rows(32, 4)) dev += "gj04\t" + std::string(r.label == "yes" ? "1" : "0") + "\t\t" + r.text + "\n";
  write(dir / "train.tsv", tsv);
  write(dir / "dev.tsv", dev);
  const std::string cmd = std::string(TENAX_BINARY) + " train " + TENAX_SOURCE_DIR + "/train/jobs/cola.toml" +
                          " model.model_name_or_path=" + kTinyModel.string() +
                          " model.ignore_mismatched_sizes=true data.train_file=" + (dir / "train.tsv").string() +
                          " data.validation_file=" + (dir / "dev.tsv").string() +
                          " output_dir=" + (dir / "out").string() +
                          " num_train_epochs=3 learning_rate=1e-3 logging_steps=2";
  const auto r = tenax::testing::run_job(cmd, dir);
  ASSERT_EQ(r.exit_code, 0) << r.log;
  const json state = read_json(dir / "out" / "trainer_state.json");
  ASSERT_TRUE(state["best_model_checkpoint"].is_string()) << state.dump();
  EXPECT_NE(state["best_model_checkpoint"].get<std::string>(), "") << state.dump();
  int evaluations = 0;
  for (const auto& entry : state["log_history"]) evaluations += entry.contains("eval_matthews_correlation");
  EXPECT_EQ(evaluations, 3) << "one evaluation per epoch\n" << state.dump();
  EXPECT_TRUE(read_json(dir / "out" / "eval_results.json").contains("eval_matthews_correlation"));
  EXPECT_TRUE(r.log.find("loaded the best model from") != std::string::npos ||
              r.log.find("is the last one") != std::string::npos)
      << "the best checkpoint loaded at the end\n"
      << r.log;
}

// A preemption (the drill sends SIGUSR1 after step 5; every rank stops at the next step
// boundary) saves and exits 3; the rerun resumes from that checkpoint to the model an uninterrupted run makes, byte for
// byte.
TEST(TenaxTrain, APreemptedJobExitsThreeAndItsRerunResumesToTheUninterruptedModel) {
  const fs::path dir = work_dir() / "preempt";
  const auto [train_file, validation_file] = write_task(dir, "single", "csv");
  const std::vector<std::string> keys = {"data.train_file=" + train_file.string(), "save_steps=3"};
  const auto reference = train(dir / "reference", keys);
  ASSERT_EQ(reference.exit_code, 0) << reference.log;

  std::vector<std::string> preempted_keys = keys;
  preempted_keys.push_back("run.preempt_at_step=5");
  const auto preempted = train(dir / "job", preempted_keys);
  ASSERT_EQ(preempted.exit_code, 3) << preempted.log;
  EXPECT_FALSE(fs::exists(dir / "job" / "out" / "model")) << "a preempted job has no final model";
  const auto rerun = train(dir / "job", keys);
  ASSERT_EQ(rerun.exit_code, 0) << rerun.log;
  const std::string marker = "preempted by SIGUSR1 at step ";
  const auto at = preempted.log.find(marker);
  ASSERT_NE(at, std::string::npos) << preempted.log;
  const int stopped = std::stoi(preempted.log.substr(at + marker.size()));
  EXPECT_GE(stopped, 5);
  EXPECT_NE(rerun.log.find("at step " + std::to_string(stopped) + ":"), std::string::npos)
      << "resumed from the preemption's checkpoint\n"
      << rerun.log;
  EXPECT_EQ(slurp(dir / "job" / "out" / "model" / "model.safetensors"),
            slurp(dir / "reference" / "out" / "model" / "model.safetensors"))
      << "the resumed model differs from the uninterrupted one";
}

// The demo's model and data, 2 ranks under `tenax run`: SIGKILL from outside, by pid, at a random
// step (printed) to a random rank; the job must end with the uninterrupted run's model.
void kill_from_outside_and_compare(const std::string& recovery) {
  const fs::path data = assets_dir() / "data" / "rotten_tomatoes";
  ASSERT_TRUE(fs::exists(data / "train.csv"))
      << "run `bash tools/fetch_assets.sh` first (assets under " << assets_dir() << ")";
  const int steps = 30;
  const auto job = [&](const fs::path& dir) {
    return std::vector<std::string>{TENAX_BINARY,
                                    "run",
                                    "--nproc-per-node",
                                    "2",
                                    "--max-restarts",
                                    "2",
                                    "--recovery",
                                    recovery,
                                    "--run-dir",
                                    (dir / "run").string(),
                                    "--",
                                    TENAX_BINARY,
                                    "train",
                                    std::string(TENAX_SOURCE_DIR) + "/train/jobs/rotten_tomatoes.toml",
                                    "model.model_name_or_path=" + (assets_dir() / "all-minilm-l6-v2").string(),
                                    "data.train_file=" + (data / "train.csv").string(),
                                    "data.validation_file=" + (data / "validation.csv").string(),
                                    "data.test_file=",
                                    "data.max_train_samples=512",
                                    "data.max_eval_samples=64",
                                    "data.max_seq_length=32",
                                    "per_device_train_batch_size=8",
                                    "max_steps=" + std::to_string(steps),
                                    "save_steps=5",
                                    "logging_steps=1",
                                    "output_dir=" + (dir / "out").string()};
  };
  const fs::path root = work_dir() / ("kill-" + recovery);
  fs::create_directories(root);
  {
    tenax::testing::ChildProcess reference(job(root / "reference"), root / "reference.log");
    ASSERT_EQ(reference.wait(std::chrono::seconds(240)), 0) << reference.log();
  }
  std::mt19937 rng(std::random_device{}());
  const int kill_step = 3 + static_cast<int>(rng() % (steps - 8));
  const int rank = static_cast<int>(rng() % 2);
  std::cout << "[ kill     ] SIGKILL to rank " << rank << " after step " << kill_step << " is printed (--recovery "
            << recovery << ")" << std::endl;
  tenax::testing::ChildProcess agent(job(root / "killed"), root / "killed.log");
  const std::string printed = "step " + std::to_string(kill_step) + "/" + std::to_string(steps) + " ";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(180);
  bool killed = false;
  while (!killed && std::chrono::steady_clock::now() < deadline && !agent.wait(std::chrono::seconds(0))) {
    if (agent.log().find(printed) != std::string::npos) {
      const pid_t worker = tenax::testing::worker_pid(agent, rank);
      ASSERT_GT(worker, 0) << "no worker of rank " << rank << "\n" << agent.log();
      ASSERT_EQ(::kill(worker, SIGKILL), 0);
      killed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(killed) << "step " << kill_step << " was never printed\n" << agent.log();
  ASSERT_EQ(agent.wait(std::chrono::seconds(240)), 0) << agent.log();
  EXPECT_NE(agent.log().find("SIGKILL"), std::string::npos) << agent.log();
  EXPECT_EQ(read_json(root / "killed" / "out" / "trainer_state.json")["global_step"], steps);
  EXPECT_EQ(slurp(root / "killed" / "out" / "model" / "model.safetensors"),
            slurp(root / "reference" / "out" / "model" / "model.safetensors"))
      << "the recovered model differs from the uninterrupted one (kill after step " << kill_step << ", rank " << rank
      << ")";
  EXPECT_EQ(read_json(root / "killed" / "out" / "eval_results.json")["eval_accuracy"],
            read_json(root / "reference" / "out" / "eval_results.json")["eval_accuracy"]);
}

TEST(TenaxTrain, AJobKilledFromOutsideAtARandomStepRestartsToTheUninterruptedModel) {
  kill_from_outside_and_compare("restart");
}

TEST(TenaxTrain, AJobKilledFromOutsideAtARandomStepRecoversInProcessToTheUninterruptedModel) {
  kill_from_outside_and_compare("in-process");
}

// Fashion-MNIST (Debian's dataset-fashion-mnist) exported to an image folder by the shipped
// tools script: 64 training and 32 test images. Fails, never skips, without the data set.
fs::path image_folder() {
  static const fs::path dir = [] {
    const fs::path out = work_dir() / "fashion-folder";
    const std::string cmd = "python3 " + std::string(TENAX_SOURCE_DIR) +
                            "/tools/idx_to_image_folder.py /usr/share/datasets/fashion-mnist " + out.string() +
                            " --limit 64 > " + (work_dir() / "export.log").string() + " 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0)
        << slurp(work_dir() / "export.log") << "(Debian's dataset-fashion-mnist: bash tools/bootstrap.sh)";
    return out;
  }();
  return dir;
}

const fs::path kTinyVit = fs::path(TENAX_SOURCE_DIR) / "tests/sdk/models/goldens/vit_tiny";

tenax::testing::JobRun train_images(const fs::path& dir, const fs::path& model, const std::vector<std::string>& keys) {
  std::string cmd = std::string(TENAX_BINARY) + " train max_steps=12 per_device_train_batch_size=16" +
                    " learning_rate=1e-3 save_steps=4 logging_steps=4 model.ignore_mismatched_sizes=true" +
                    " model.model_name_or_path=" + model.string() + " output_dir=" + (dir / "out").string() +
                    " data.train_dir=" + (image_folder() / "train").string();
  for (const auto& k : keys) cmd += " " + quoted(k);
  return tenax::testing::run_job(cmd, dir);
}

// A ViT fine-tuned on an image folder with the training augmentation; the same job from a bare
// config.json (from scratch); a preempted augmented job resumed to the uninterrupted model (the
// crops and flips of every epoch drawn again the same).
TEST(TenaxTrain, AnImageFolderJobFineTunesTrainsFromScratchAndResumesItsAugmentationExactly) {
  const fs::path dir = work_dir() / "images";
  const std::vector<std::string> eval = {"data.validation_dir=" + (image_folder() / "test").string(),
                                         "eval_strategy=steps", "eval_steps=4"};
  const auto tuned = train_images(dir / "tuned", kTinyVit, eval);
  ASSERT_EQ(tuned.exit_code, 0) << tuned.log;
  const json config = read_json(dir / "tuned" / "out" / "model" / "config.json");
  EXPECT_EQ(config["id2label"].size(), 10u) << config.dump();
  EXPECT_EQ(config["id2label"]["0"], "Ankle_boot") << config.dump();  // the class folders, sorted
  EXPECT_EQ(config["problem_type"], "single_label_classification");
  EXPECT_TRUE(fs::is_regular_file(dir / "tuned" / "out" / "model" / "preprocessor_config.json"));
  EXPECT_TRUE(read_json(dir / "tuned" / "out" / "eval_results.json").contains("eval_accuracy"));
  EXPECT_NE(tuned.log.find("training images augmented"), std::string::npos) << tuned.log;

  const fs::path bare = dir / "bare-config";
  fs::create_directories(bare);
  fs::copy_file(kTinyVit / "config.json", bare / "config.json");
  fs::copy_file(kTinyVit / "preprocessor_config.json", bare / "preprocessor_config.json");
  const auto scratch = train_images(dir / "scratch", bare, eval);
  ASSERT_EQ(scratch.exit_code, 0) << scratch.log;
  EXPECT_NE(scratch.log.find("trained from config.json, from scratch"), std::string::npos) << scratch.log;
  EXPECT_TRUE(fs::is_regular_file(dir / "scratch" / "out" / "model" / "preprocessor_config.json"));

  // 64 images in batches of 16: 4 steps an epoch, so 12 steps are 3 epochs of fresh draws.
  const auto reference = train_images(dir / "reference", kTinyVit, {});
  ASSERT_EQ(reference.exit_code, 0) << reference.log;
  const auto preempted = train_images(dir / "job", kTinyVit, {"run.preempt_at_step=6"});
  ASSERT_EQ(preempted.exit_code, 3) << preempted.log;
  const auto rerun = train_images(dir / "job", kTinyVit, {});
  ASSERT_EQ(rerun.exit_code, 0) << rerun.log;
  EXPECT_NE(rerun.log.find("resumed from"), std::string::npos) << rerun.log;
  EXPECT_EQ(slurp(dir / "job" / "out" / "model" / "model.safetensors"),
            slurp(dir / "reference" / "out" / "model" / "model.safetensors"))
      << "the resumed image job differs from the uninterrupted one";
}

// The beans job file as shipped, on the exported Fashion-MNIST folder with the tiny ViT.
TEST(TenaxTrain, TheBeansJobRunsOnAnImageFolderAndLoadsTheBestModelByAccuracy) {
  const fs::path dir = work_dir() / "beans";
  const std::string cmd = std::string(TENAX_BINARY) + " train " + TENAX_SOURCE_DIR + "/train/jobs/beans.toml" +
                          " model.model_name_or_path=" + kTinyVit.string() +
                          " data.train_dir=" + (image_folder() / "train").string() +
                          " data.validation_dir=" + (image_folder() / "test").string() +
                          " output_dir=" + (dir / "out").string() + " num_train_epochs=2 learning_rate=1e-3";
  const auto r = tenax::testing::run_job(cmd, dir);
  ASSERT_EQ(r.exit_code, 0) << r.log;
  const json state = read_json(dir / "out" / "trainer_state.json");
  EXPECT_NE(state.value("best_model_checkpoint", ""), "") << state.dump();
  int evaluations = 0;
  for (const auto& entry : state["log_history"]) evaluations += entry.contains("eval_accuracy");
  EXPECT_EQ(evaluations, 2) << "one evaluation per epoch\n" << state.dump();
  EXPECT_TRUE(read_json(dir / "out" / "model" / "config.json")["id2label"].size() == 10);
}

// The Fashion-MNIST job file as shipped (make demo-image's) on Debian's IDX files, cut short: a
// ViT trained from its bare config.json, classes named by data.label_names. Then with the
// training augmentation: a preempted job resumed with two loading threads
// (dataloader_num_workers) ends bit-identical to an uninterrupted one that loaded in the loop.
const fs::path kFashionMnist = "/usr/share/datasets/fashion-mnist";

tenax::testing::JobRun train_idx(const fs::path& dir, const std::vector<std::string>& keys) {
  std::string cmd = std::string(TENAX_BINARY) + " train " + TENAX_SOURCE_DIR + "/train/jobs/fashion_mnist.toml" +
                    " model.model_name_or_path=" + TENAX_SOURCE_DIR + "/train/jobs/fashion_mnist_vit" +
                    " max_steps=12 per_device_train_batch_size=16 save_steps=4 logging_steps=4" +
                    " data.max_train_samples=128 data.max_eval_samples=64 data.max_predict_samples=64" +
                    " output_dir=" + (dir / "out").string();
  for (const auto& k : keys) cmd += " " + quoted(k);
  return tenax::testing::run_job(cmd, dir);
}

TEST(TenaxTrain, TheFashionMnistJobTrainsOnIdxFilesAndResumesItsAugmentationExactlyWithLoadingThreads) {
  ASSERT_TRUE(fs::exists(kFashionMnist / "train-images-idx3-ubyte.gz"))
      << "Debian's dataset-fashion-mnist is missing (tools/bootstrap.sh installs it)";
  const fs::path dir = work_dir() / "idx";
  const auto plain = train_idx(dir / "plain", {});
  ASSERT_EQ(plain.exit_code, 0) << plain.log;
  EXPECT_NE(plain.log.find("trained from config.json, from scratch"), std::string::npos) << plain.log;
  EXPECT_NE(plain.log.find("images of 28x28 (IDX)"), std::string::npos) << plain.log;
  const json config = read_json(dir / "plain" / "out" / "model" / "config.json");
  EXPECT_EQ(config["id2label"]["0"], "T-shirt/top") << config.dump();
  EXPECT_EQ(config["id2label"]["9"], "Ankle boot") << config.dump();
  EXPECT_TRUE(read_json(dir / "plain" / "out" / "test_results.json").contains("test_accuracy"));
  EXPECT_TRUE(fs::is_regular_file(dir / "plain" / "out" / "model" / "preprocessor_config.json"));

  // 128 images in batches of 16: 8 steps an epoch, so 12 steps draw crops in two epochs.
  const std::vector<std::string> augment = {"data.augment=true", "data.crop_scale_min=0.5"};
  const auto reference = train_idx(dir / "reference", augment);
  ASSERT_EQ(reference.exit_code, 0) << reference.log;
  auto preempt = augment;
  preempt.push_back("run.preempt_at_step=6");
  const auto preempted = train_idx(dir / "job", preempt);
  ASSERT_EQ(preempted.exit_code, 3) << preempted.log;
  auto threads = augment;
  threads.push_back("dataloader_num_workers=2");
  const auto rerun = train_idx(dir / "job", threads);
  ASSERT_EQ(rerun.exit_code, 0) << rerun.log;
  EXPECT_NE(rerun.log.find("resumed from"), std::string::npos) << rerun.log;
  EXPECT_NE(rerun.log.find("(dataloader_num_workers = 2)"), std::string::npos) << rerun.log;
  EXPECT_EQ(slurp(dir / "job" / "out" / "model" / "model.safetensors"),
            slurp(dir / "reference" / "out" / "model" / "model.safetensors"))
      << "the resumed IDX job differs from the uninterrupted one";
  EXPECT_NE(slurp(dir / "plain" / "out" / "model" / "model.safetensors"),
            slurp(dir / "reference" / "out" / "model" / "model.safetensors"))
      << "the augmentation changed nothing";
}

TEST(TenaxTrain, BadIdxInputExitsTwoNamingTheFile) {
  const fs::path dir = work_dir() / "bad-idx";
  fs::create_directories(dir / "lone");
  fs::copy_file(kFashionMnist / "t10k-images-idx3-ubyte.gz", dir / "lone" / "t10k-images-idx3-ubyte.gz");
  const auto lone = train_idx(dir, {"data.train_file=" + (dir / "lone" / "t10k-images-idx3-ubyte.gz").string()});
  EXPECT_EQ(lone.exit_code, 2) << lone.log;
  EXPECT_NE(lone.log.find("t10k-labels-idx1-ubyte.gz"), std::string::npos) << lone.log;
  write(dir / "cut" / "train-images-idx3-ubyte", std::string("\0\0\x08\x03\0\0\0\x10", 8));
  fs::copy_file(kFashionMnist / "train-labels-idx1-ubyte.gz", dir / "cut" / "train-labels-idx1-ubyte.gz");
  const auto cut = train_idx(dir, {"data.train_file=" + (dir / "cut" / "train-images-idx3-ubyte").string()});
  EXPECT_EQ(cut.exit_code, 2) << cut.log;
  EXPECT_NE(cut.log.find("data.train_file"), std::string::npos) << cut.log;
  EXPECT_NE(cut.log.find("train-images-idx3-ubyte"), std::string::npos) << cut.log;
  const auto named = train_idx(dir, {"data.train_file=" + (dir / "lone" / "images.bin").string(), "data.format=idx"});
  EXPECT_EQ(named.exit_code, 2) << named.log;
  EXPECT_NE(named.log.find("images-idx3"), std::string::npos) << named.log;
  const auto few = train_idx(dir, {"data.label_names=a,b"});
  EXPECT_EQ(few.exit_code, 2) << few.log;
  EXPECT_NE(few.log.find("data.label_names"), std::string::npos) << few.log;
  EXPECT_FALSE(fs::exists(dir / "out" / "checkpoints")) << "a refused job wrote checkpoints";
}

TEST(TenaxTrain, BadImageInputExitsTwoNamingTheFolderOrFile) {
  const fs::path dir = work_dir() / "bad-images";
  const fs::path folder = dir / "folder";
  fs::create_directories(dir);
  fs::copy(image_folder() / "train", folder, fs::copy_options::recursive);
  fs::create_directories(folder / "Empty_class");
  const auto empty = train_images(dir, kTinyVit, {"data.train_dir=" + folder.string()});
  EXPECT_EQ(empty.exit_code, 2) << empty.log;
  EXPECT_NE(empty.log.find((folder / "Empty_class").string()), std::string::npos) << empty.log;
  fs::remove(folder / "Empty_class");
  write(folder / "Bag" / "zz-broken.png", "\x89PNG\r\n\x1a\ntruncated");
  const auto broken = train_images(dir, kTinyVit, {"data.train_dir=" + folder.string()});
  EXPECT_EQ(broken.exit_code, 2) << broken.log;
  EXPECT_NE(broken.log.find("zz-broken.png"), std::string::npos) << broken.log;
  const auto mixed = train_images(dir, kTinyVit, {"data.validation_file=x.csv"});
  EXPECT_EQ(mixed.exit_code, 2) << mixed.log;
  EXPECT_NE(mixed.log.find("data.validation_dir"), std::string::npos) << mixed.log;
  const auto wrong_model = train_images(dir, kTinyModel, {});
  EXPECT_EQ(wrong_model.exit_code, 2) << wrong_model.log;
  EXPECT_NE(wrong_model.log.find("use a vit model"), std::string::npos) << wrong_model.log;
  EXPECT_FALSE(fs::exists(dir / "out" / "checkpoints")) << "a refused job wrote checkpoints";
}

struct BadInput {
  std::string name;
  std::vector<std::string> keys;
  std::vector<std::string> says;  // every one must be in the error
};

TEST(TenaxTrain, BadInputExitsTwoBeforeTrainingNamingWhatToFixAndLosesNothing) {
  const fs::path dir = work_dir() / "bad";
  const auto [train_file, validation_file] = write_task(dir, "single", "csv");
  write(dir / "empty.csv", "text,label\n");
  write(dir / "truncated.csv", "text,label\n\"good movie,yes\n");
  write(dir / "unknown_label.csv", "text,label\ngood,yes\nbad,no\nmeh,maybe\n");
  write(dir / "regression_bad.csv", "text,label\ngood,1.5\nbad,x\n");
  const std::string train_key = "data.train_file=" + train_file.string();
  const std::vector<BadInput> cases = {
      {"missing column",
       {train_key, "data.text_column_names=sentence"},
       {"train.csv", "sentence", "columns: text, label"}},
      {"label not in the label list", {train_key, "data.label_names=no,maybe"}, {"train.csv:", "'yes'", "'maybe'"}},
      {"label of another split",
       {train_key, "data.validation_file=" + (dir / "unknown_label.csv").string()},
       {"unknown_label.csv:4", "'maybe'"}},
      {"head size that does not match",
       {train_key, "model.ignore_mismatched_sizes=false"},
       {"classifier", "shape [3]", "model.ignore_mismatched_sizes"}},
      {"empty file", {"data.train_file=" + (dir / "empty.csv").string()}, {"data.train_file", "empty.csv", "no rows"}},
      {"truncated file", {"data.train_file=" + (dir / "truncated.csv").string()}, {"truncated.csv:2", "quote"}},
      {"missing file", {"data.train_file=" + (dir / "none.csv").string()}, {"data.train_file", "none.csv"}},
      {"not a number in regression",
       {"data.train_file=" + (dir / "regression_bad.csv").string(), "model.problem_type=regression"},
       {"regression_bad.csv:3", "'x'", "not a number"}},
      {"unknown metric", {train_key, "metrics.metric_name=auc"}, {"metrics.metric_name", "auc"}},
      {"metric of another task", {train_key, "metrics.metric_name=pearson"}, {"metrics.metric_name", "pearson"}},
      {"binary average on three classes",
       {train_key, "metrics.average=binary", "data.label_names=no,yes,maybe", "metrics.metric_name=f1"},
       {"metrics.average", "3 classes"}},
      {"evaluation without a validation file", {train_key, "eval_strategy=epoch"}, {"data.validation_file"}},
      {"best-model metric not computed",
       {train_key, "data.validation_file=" + validation_file.string(), "eval_strategy=epoch", "save_strategy=epoch",
        "load_best_model_at_end=true", "metric_for_best_model=matthews_correlation"},
       {"metric_for_best_model", "matthews_correlation", "metrics.metric_name"}},
      {"misspelt key", {train_key, "data.max_seq_lenght=32"}, {"max_seq_lenght", "data.max_seq_length"}},
      {"no model",
       {train_key, "model.model_name_or_path=" + (dir / "no-model").string()},
       {"model.model_name_or_path", "config.json"}},
      {"unknown problem type", {train_key, "model.problem_type=ranking"}, {"model.problem_type", "ranking"}},
      {"value that is not a number",
       {train_key, "data.max_seq_length=abc"},
       {"data.max_seq_length 'abc' is not an integer"}},
      {"value out of range", {train_key, "data.max_seq_length=1000"}, {"data.max_seq_length", "[3, 512]"}},
      {"unknown model family", {train_key, "model.model_type=gpt2"}, {"model.model_type", "'gpt2'"}},
      {"model family that config.json does not name",
       {train_key, "model.model_type=bert"},
       {"model.model_type", "is a \"distilbert\" model"}},
  };
  // An output directory with a finished run's results in it: a refused job must not touch it.
  const fs::path out = dir / "out";
  write(out / "all_results.json", "{\"eval_accuracy\": 0.9}\n");
  write(out / "model" / "config.json", "{}\n");
  for (const BadInput& c : cases) {
    SCOPED_TRACE(c.name);
    const auto r = train(dir, c.keys);
    EXPECT_EQ(r.exit_code, 2) << r.log;
    EXPECT_NE(r.log.find("configuration error"), std::string::npos) << r.log;
    for (const auto& s : c.says) EXPECT_NE(r.log.find(s), std::string::npos) << "'" << s << "' not said:\n" << r.log;
    EXPECT_EQ(r.log.find("steps per epoch"), std::string::npos) << "training started\n" << r.log;
  }
  EXPECT_EQ(slurp(out / "all_results.json"), "{\"eval_accuracy\": 0.9}\n");
  EXPECT_EQ(slurp(out / "model" / "config.json"), "{}\n");
  std::vector<std::string> entries;
  for (const auto& e : fs::directory_iterator(out)) entries.push_back(e.path().filename().string());
  std::sort(entries.begin(), entries.end());
  EXPECT_EQ(entries, (std::vector<std::string>{"all_results.json", "model"})) << "the refused jobs wrote to " << out;
}

// A job file's own mistakes are said with the file and line, or the key, before anything is read.
TEST(TenaxTrain, AJobFileWithABadKeyOrValueExitsTwoNamingIt) {
  const fs::path dir = work_dir() / "bad-job-file";
  write(dir / "typo.toml", "output_dir = \"" + (dir / "out").string() + "\"\nlearnin_rate = 1e-4\n");
  auto r = tenax::testing::run_job(std::string(TENAX_BINARY) + " train " + (dir / "typo.toml").string(), dir);
  EXPECT_EQ(r.exit_code, 2) << r.log;
  EXPECT_NE(r.log.find("typo.toml:2: unknown key 'learnin_rate' (did you mean 'learning_rate'?)"), std::string::npos)
      << r.log;
  write(dir / "range.toml", "output_dir = \"" + (dir / "out").string() + "\"\n[data]\nmax_seq_length = 1000\n");
  r = tenax::testing::run_job(std::string(TENAX_BINARY) + " train " + (dir / "range.toml").string() +
                                  " model.model_name_or_path=" + kTinyModel.string() +
                                  " data.train_file=" + (dir / "none.csv").string(),
                              dir);
  EXPECT_EQ(r.exit_code, 2) << r.log;
  EXPECT_NE(r.log.find("data.max_seq_length: must be in [3, 512]"), std::string::npos) << r.log;
  EXPECT_FALSE(fs::exists(dir / "out")) << "a refused job wrote to its output_dir";
}

// The shipped jobs read the model and data of tools/fetch_assets.sh from .assets/ under the
// working directory. Run where there are none, the Rotten Tomatoes job exits 2 naming the key,
// the missing path and how to fetch them; a missing file of the user's own gets no such advice.
TEST(TenaxTrain, TheShippedJobWithoutItsAssetsExitsTwoSayingHowToFetchThem) {
  const fs::path dir = work_dir() / "no-assets";
  fs::create_directories(dir);
  const std::string job = "cd " + dir.string() + " && " + TENAX_BINARY + " train " + TENAX_SOURCE_DIR +
                          "/train/jobs/rotten_tomatoes.toml output_dir=" + (dir / "out").string();
  const auto no_model = tenax::testing::run_job(job, dir);
  EXPECT_EQ(no_model.exit_code, 2) << no_model.log;
  for (const char* says :
       {"model.model_name_or_path", ".assets/all-minilm-l6-v2/config.json is missing", "bash tools/fetch_assets.sh"}) {
    EXPECT_NE(no_model.log.find(says), std::string::npos) << "'" << says << "' not said:\n" << no_model.log;
  }
  const std::string tiny = " model.model_name_or_path=" + kTinyModel.string() + " model.ignore_mismatched_sizes=true";
  const auto no_data = tenax::testing::run_job(job + tiny, dir);
  EXPECT_EQ(no_data.exit_code, 2) << no_data.log;
  for (const char* says : {"data.train_file", ".assets/data/rotten_tomatoes/train.csv", "bash tools/fetch_assets.sh"}) {
    EXPECT_NE(no_data.log.find(says), std::string::npos) << "'" << says << "' not said:\n" << no_data.log;
  }
  const auto own = tenax::testing::run_job(job + tiny + " data.train_file=" + (dir / "mine.csv").string(), dir);
  EXPECT_EQ(own.exit_code, 2) << own.log;
  EXPECT_NE(own.log.find("mine.csv"), std::string::npos) << own.log;
  EXPECT_EQ(own.log.find("fetch_assets"), std::string::npos) << own.log;
  EXPECT_FALSE(fs::exists(dir / "out")) << "a refused job wrote to its output_dir";
}

TEST(TenaxTrain, PrintConfigShowsTheShippedJobWithTheCommandLineOverridesApplied) {
  const fs::path dir = work_dir() / "print";
  for (const char* file : {"rotten_tomatoes.toml", "cola.toml", "beans.toml", "fashion_mnist.toml"}) {
    const auto r =
        tenax::testing::run_job(std::string(TENAX_BINARY) + " train " + TENAX_SOURCE_DIR + "/train/jobs/" + file +
                                    " data.max_seq_length=99 --learning_rate 7e-5 --logging_dir tb=1 "
                                    "--print-config",
                                dir);
    ASSERT_EQ(r.exit_code, 0) << file << "\n" << r.log;
    EXPECT_NE(r.stdout_text.find("logging_dir = \"tb=1\""), std::string::npos) << r.stdout_text;
    EXPECT_NE(r.stdout_text.find("max_seq_length = 99"), std::string::npos) << r.stdout_text;
    EXPECT_NE(r.stdout_text.find("learning_rate = 7e-05"), std::string::npos) << r.stdout_text;
    EXPECT_NE(r.stdout_text.find("[metrics]"), std::string::npos) << r.stdout_text;
  }
  const auto help = tenax::testing::run_job(std::string(TENAX_BINARY) + " train --help", dir);
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.stdout_text.find("--train_file"), std::string::npos) << help.stdout_text;
}

}  // namespace
