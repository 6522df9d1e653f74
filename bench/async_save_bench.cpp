// The whole cost of an async checkpoint: how long save_checkpoint() blocks the training thread,
// and how much slower the steps run while the background writer copies, writes, fsyncs and
// commits. One process trains a BertForSequenceClassification through the Trainer's step API
// (begin / step / save_checkpoint / end) on synthetic token batches (fixed seed), times every
// step, and saves after the steps given by --save-at. Run by bench/async_save_bench.py, which
// runs the same job without saves (--mode none) beside it and compares the same step indices.
//
//   async_save_bench --model minilm --model-dir .assets/all-minilm-l6-v2 --output-dir DIR
//                    --mode async|sync|none [--steps 24] [--save-at 4,14] [--batch 4] [--seq 64]
//                    [--threads 2] [--seed 1]
//
// Models: "minilm" is all-MiniLM-L6-v2 (22.7 M parameters) from its model directory;
// "bert-base" is built from bert-base-uncased's config.json (768 hidden, 12 layers, 12 heads,
// 3072 intermediate, vocabulary 30522: 109.5 M parameters) with random initialisation. No
// pretrained BERT-base weights are available offline, and none are needed: a save costs what
// the state's size and layout cost (parameters + AdamW's two moments, ~1.3 GB), whatever the
// values are.
// With TENAX_TRACE_FILE set (the Python driver sets it) the Checkpointer writes its phases
// (save.begin, save.copied, save.renamed, save.result, ...) with CLOCK_MONOTONIC timestamps,
// the clock of the step times printed here (steady_clock), so the save window lines up with
// the steps.
// Output: one line "ASYNC_SAVE_BENCH {json}": step start/end times (monotonic ns), the
// save_checkpoint() calls' start/end, the loop's start/end, the committed checkpoint directories.
// A save that did not commit (on_save_error, a missing manifest) makes the program fail, so a
// silently failed save is never timed.
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "tenax/core/env.h"
#include "tenax/core/error.h"
#include "tenax/core/exit_codes.h"
#include "tenax/elastic/worker_context.h"
#include "tenax/sdk/models/bert.h"
#include "tenax/sdk/models/bert_config.h"
#include "tenax/sdk/trainer.h"
#include "tenax/sdk/trainer_callback.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// bert-base-uncased's config.json (architecture keys as published by Google/Hugging Face).
constexpr const char* kBertBaseConfig = R"({
  "architectures": ["BertForMaskedLM"],
  "attention_probs_dropout_prob": 0.1,
  "hidden_act": "gelu",
  "hidden_dropout_prob": 0.1,
  "hidden_size": 768,
  "initializer_range": 0.02,
  "intermediate_size": 3072,
  "layer_norm_eps": 1e-12,
  "max_position_embeddings": 512,
  "model_type": "bert",
  "num_attention_heads": 12,
  "num_hidden_layers": 12,
  "pad_token_id": 0,
  "position_embedding_type": "absolute",
  "type_vocab_size": 2,
  "vocab_size": 30522
})";

struct Options {
  std::string model = "minilm";
  std::string model_dir;
  std::string output_dir;
  std::string mode = "async";
  std::int64_t steps = 24;
  std::set<std::int64_t> save_at = {4, 14};
  std::int64_t batch = 4;
  std::int64_t seq = 64;
  int threads = 2;
  std::uint64_t seed = 1;
};

constexpr const char* kUsage =
    "usage: async_save_bench --model minilm|bert-base [--model-dir DIR] --output-dir DIR --mode async|sync|none\n"
    "       [--steps N] [--save-at S1,S2,...] [--batch N] [--seq N] [--threads N] [--seed N]\n";

[[noreturn]] void usage_error(const std::string& message) {
  std::cerr << "async_save_bench: " << message << "\n" << kUsage;
  std::exit(tenax::kExitUsage);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::cout << kUsage;
      std::exit(0);
    }
    if (i + 1 >= argc) usage_error(flag + " needs a value");
    const std::string value = argv[++i];
    auto as_int = [&] { return tenax::env::parse_int(value, flag); };
    if (flag == "--model")
      o.model = value;
    else if (flag == "--model-dir")
      o.model_dir = value;
    else if (flag == "--output-dir")
      o.output_dir = value;
    else if (flag == "--mode")
      o.mode = value;
    else if (flag == "--steps")
      o.steps = as_int();
    else if (flag == "--batch")
      o.batch = as_int();
    else if (flag == "--seq")
      o.seq = as_int();
    else if (flag == "--threads")
      o.threads = static_cast<int>(as_int());
    else if (flag == "--seed")
      o.seed = static_cast<std::uint64_t>(as_int());
    else if (flag == "--save-at") {
      o.save_at.clear();
      std::stringstream list(value);
      for (std::string item; std::getline(list, item, ',');) o.save_at.insert(tenax::env::parse_int(item, flag));
    } else
      usage_error("unknown flag " + flag);
  }
  if (o.model != "minilm" && o.model != "bert-base") usage_error("--model must be minilm or bert-base, not " + o.model);
  if (o.model == "minilm" && o.model_dir.empty()) usage_error("--model minilm needs --model-dir (all-minilm-l6-v2)");
  if (o.mode != "async" && o.mode != "sync" && o.mode != "none") usage_error("--mode must be async, sync or none");
  if (o.output_dir.empty()) usage_error("--output-dir is required");
  if (o.steps <= 0 || o.batch <= 0 || o.seq <= 0 || o.threads <= 0) {
    usage_error("--steps, --batch, --seq and --threads must be >= 1");
  }
  for (std::int64_t s : o.save_at) {
    if (s < 1 || s >= o.steps) usage_error("--save-at " + std::to_string(s) + " is not within 1..steps-1");
  }
  return o;
}

std::shared_ptr<tenax::sdk::BertForSequenceClassification> build_model(const Options& o) {
  torch::manual_seed(o.seed);  // the classifier head (and bert-base's every weight) is drawn here
  if (o.model == "minilm") {
    return tenax::sdk::BertForSequenceClassification::from_pretrained(o.model_dir,
                                                                      tenax::sdk::PretrainedOptions().num_labels(2));
  }
  tenax::sdk::BertConfig config = tenax::sdk::BertConfig::from_json_string(kBertBaseConfig, "bert-base-uncased config");
  config.set_num_labels(2);
  return std::make_shared<tenax::sdk::BertForSequenceClassification>(config);
}

// Step s's batch: random tokens (no padding) and labels from a generator seeded by (seed, s),
// the same in every mode.
tenax::sdk::Batch batch_of(const Options& o, std::int64_t step) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(o.seed * 1000003ull + static_cast<std::uint64_t>(step));
  tenax::sdk::Batch b;
  b.input_ids = at::randint(1000, 30000, {o.batch, o.seq}, gen, torch::kInt64);
  b.attention_mask = torch::ones({o.batch, o.seq}, torch::kInt64);
  b.token_type_ids = torch::zeros({o.batch, o.seq}, torch::kInt64);
  b.labels = at::randint(0, 2, {o.batch}, gen, torch::kInt64);
  return b;
}

// Records what the Trainer reports about each save: a commit (on_save) or a failure.
class SaveWatch final : public tenax::sdk::TrainerCallback {
 public:
  void on_save(const tenax::sdk::TrainingArguments&, tenax::sdk::TrainerState&, tenax::sdk::TrainerControl&,
               const std::string& checkpoint_dir) override {
    committed.push_back(checkpoint_dir);
  }
  void on_save_error(const tenax::sdk::TrainingArguments&, tenax::sdk::TrainerState&, tenax::sdk::TrainerControl&,
                     const std::string& error) override {
    errors.push_back(error);
  }
  std::vector<std::string> committed;
  std::vector<std::string> errors;
};

std::int64_t ns(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

int run(const Options& o) {
  torch::set_num_threads(o.threads);
  auto context = tenax::elastic::WorkerContext::from_env();  // no launcher: a single process
  auto model = build_model(o);
  std::int64_t parameters = 0;
  for (const auto& p : model->parameters()) parameters += p.numel();

  tenax::sdk::TrainingArguments args;
  args.output_dir = o.output_dir;
  args.max_steps = o.steps;
  args.per_device_train_batch_size = o.batch;
  args.learning_rate = 2e-5;
  args.weight_decay = 0.01;
  args.logging_strategy = "no";
  args.save_strategy = "no";  // the caller saves (save_checkpoint), as an embedding code does
  args.save_steps = 0;
  args.save_async = o.mode == "async";
  args.on_save_error = "stop";
  args.report_to = {"none"};
  args.disable_tqdm = true;
  args.use_cpu = true;
  args.seed = o.seed;
  auto watch = std::make_shared<SaveWatch>();
  tenax::sdk::Trainer trainer(model, args, nullptr, context);
  trainer.add_callback(watch);
  trainer.begin(/*resume=*/false);

  std::vector<tenax::sdk::Batch> batches;
  for (std::int64_t s = 0; s < o.steps; ++s) batches.push_back(batch_of(o, s));

  nlohmann::json steps = nlohmann::json::array();
  nlohmann::json saves = nlohmann::json::array();
  const auto loop_start = Clock::now();
  for (std::int64_t s = 0; s < o.steps; ++s) {
    const auto t0 = Clock::now();
    trainer.step({batches[static_cast<std::size_t>(s)]});
    const auto t1 = Clock::now();
    steps.push_back({ns(t0), ns(t1)});
    if (o.mode != "none" && o.save_at.count(s + 1) != 0) {
      const auto c0 = Clock::now();
      trainer.save_checkpoint();  // labelled with the optimizer step, s + 1
      const auto c1 = Clock::now();
      saves.push_back({{"step", s + 1}, {"call_start", ns(c0)}, {"call_end", ns(c1)}});
    }
  }
  // The last save must be known committed before the loop counts as done (as train() does).
  trainer.wait_for_checkpoint();
  const auto loop_end = Clock::now();
  trainer.end();

  // Every save committed: the Trainer reported each (on_save) and its directory has a manifest.
  if (!watch->errors.empty()) throw tenax::StorageError("a save failed: " + watch->errors.front());
  if (o.mode != "none" && watch->committed.size() != o.save_at.size()) {
    throw tenax::StorageError(std::to_string(watch->committed.size()) + " saves committed, expected " +
                              std::to_string(o.save_at.size()));
  }
  for (const auto& dir : watch->committed) {
    if (!fs::exists(fs::path(dir) / "manifest.json")) throw tenax::StorageError(dir + " has no manifest.json");
  }

  nlohmann::json out = {{"model", o.model},
                        {"mode", o.mode},
                        {"parameters", parameters},
                        {"threads", o.threads},
                        {"batch", o.batch},
                        {"seq", o.seq},
                        {"steps", steps},
                        {"saves", saves},
                        {"loop_start", ns(loop_start)},
                        {"loop_end", ns(loop_end)},
                        {"committed", watch->committed}};
  std::cout << "ASYNC_SAVE_BENCH " << out.dump() << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::cerr << "async_save_bench: " << e.what() << "\n";
    return 1;
  }
}
