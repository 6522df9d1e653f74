// Fine-tunes a text classifier (all-MiniLM-L6-v2 by default; any registered family: BERT,
// DistilBERT, picked by the model directory's config.json) on the Rotten Tomatoes snippets
// through tenax::sdk::Trainer, data-parallel on the ranks `tenax run` starts, then evaluates
// once on the held-out test split.
//
//   tenax run --nproc-per-node 2 -- ./finetune_text --output-dir runs/ft
//       --epochs 1 --save-steps 100 --fail-at-step 150 --fail-rank 1   (one command line)
//   tenax run --nproc-per-node 2 -- ./finetune_text --config examples/finetune_text/finetune.toml
//   tenax run --nproc-per-node 2 -- ./finetune_text --model-type distilbert
//       --model-dir tests/sdk/models/goldens/distilbert_tiny --ignore-mismatched-sizes true
//       --output-dir runs/ft-distilbert       (that tiny model's head has 3 labels, the data 2)
//
// Every TrainingArguments field and the example's own settings (options.h) are keys of the
// TOML file and flags; `finetune_text --help` lists them with their defaults.
//
// Only the train split trains; validation is evaluated after training (the place for model
// selection); test is evaluated once, at the end. Rank 0 writes the fine-tuned model to
// <output-dir>/model (save_pretrained: config.json with id2label/label2id, model.safetensors,
// tokenizer files) and prints one line for scripts on stdout:
//   TENAX_RESULT {"test_accuracy":..,"test_f1":..,"train_samples_per_second":..,
//                 "train_runtime_s":..,"eval_runtime_s":..,"global_step":..,"world_size":..}
// test_f1 is the binary F1 of label id 1 ("rotten": ids follow sorted label names).
// Exit codes: 0 done, 2 usage/configuration (bad flag, missing assets), 3 preempted, 1 failure.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "example_cli.h"
#include "tenax/sdk/callbacks/fault_drills.h"
#include "options.h"
#include "profile_steps.h"
#include "tenax/core/error.h"
#include "tenax/core/exit_codes.h"
#include "tenax/core/logging.h"
#include "tenax/elastic/worker_context.h"
#include "tenax/sdk/metrics.h"
#include "tenax/sdk/models/auto_model.h"
#include "tenax/sdk/text_collator.h"
#include "tenax/sdk/text_dataset.h"
#include "tenax/sdk/tokenized_text_dataset.h"
#include "tenax/sdk/trainer.h"

namespace {

namespace fs = std::filesystem;
using tenax::examples::FinetuneOptions;

// Missing assets are a configuration error (exit 2: a restart cannot fix it) that says how to
// get them.
void require_assets(const FinetuneOptions& o) {
  const std::vector<std::pair<fs::path, std::string>> needed = {
      {fs::path(o.model_dir) / "config.json", "--model-dir"},
      {fs::path(o.model_dir) / "model.safetensors", "--model-dir"},
      {fs::path(o.model_dir) / "vocab.txt", "--model-dir"},
      {fs::path(o.data_dir) / "train.csv", "--data-dir"},
      {fs::path(o.data_dir) / "validation.csv", "--data-dir"},
      {fs::path(o.data_dir) / "test.csv", "--data-dir"}};
  for (const auto& [file, flag] : needed) {
    if (!fs::is_regular_file(file)) {
      throw tenax::ConfigError(file.string() + " is missing (" + flag +
                               "). Fetch the model and data with `bash tools/fetch_assets.sh` from the "
                               "repository root (TENAX_ASSETS moves them), or pass " +
                               flag);
    }
  }
}

// The first `limit` records (0: all). The splits are hash-bucketed, so a prefix is an unbiased
// sample.
tenax::sdk::TextRecords head(tenax::sdk::TextRecords records, std::int64_t limit) {
  if (limit > 0) records.truncate(static_cast<std::size_t>(limit));
  return records;
}

// Token counts (with [CLS]/[SEP]) after truncation: median, 95th percentile, and how many
// texts max_length cut, so that the choice of max_length can be checked on every run.
std::string length_summary(const tenax::sdk::TokenizedTextDataset& data, std::int64_t max_length) {
  std::vector<std::size_t> lengths;
  for (std::int64_t i = 0; i < data.size(); ++i) lengths.push_back(data.encoding(i).size());
  std::sort(lengths.begin(), lengths.end());
  const auto at = [&](double q) {
    return lengths[static_cast<std::size_t>(q * static_cast<double>(lengths.size() - 1))];
  };
  const auto cut = std::count(lengths.begin(), lengths.end(), static_cast<std::size_t>(max_length));
  char buf[160];
  std::snprintf(buf, sizeof buf, "tokens p50 %zu, p95 %zu, p99 %zu, max %zu; %td of %zu at max_length %lld", at(0.5),
                at(0.95), at(0.99), lengths.back(), cut, lengths.size(), static_cast<long long>(max_length));
  return buf;
}

std::map<std::string, double> classification_metrics(const tenax::sdk::PredictionOutput& p) {
  const auto y_true = p.label_id_vector();
  const auto y_pred = p.argmax_vector();
  return {{"accuracy", tenax::sdk::accuracy(y_true, y_pred)},
          {"f1", tenax::sdk::f1_binary(y_true, y_pred, 1)},
          {"mcc", tenax::sdk::matthews_corrcoef(y_true, y_pred)}};
}

int run(const FinetuneOptions& o) {
  require_assets(o);
  // Ranks share the machine's cores: a fixed, small thread count per rank avoids
  // oversubscription and keeps the arithmetic the same from run to run.
  torch::set_num_threads(static_cast<int>(o.threads));

  const auto tokenizer = tenax::sdk::BertTokenizer::from_pretrained(o.model_dir);
  const auto train_records = head(tenax::sdk::read_text_records(o.data_dir + "/train.csv"), o.train_limit);
  const auto validation_records = head(tenax::sdk::read_text_records(o.data_dir + "/validation.csv"), o.eval_limit);
  const auto test_records = head(tenax::sdk::read_text_records(o.data_dir + "/test.csv"), o.eval_limit);
  const auto labels = tenax::sdk::LabelMap::from_records(train_records);
  auto train = std::make_shared<tenax::sdk::TokenizedTextDataset>(train_records, labels, tokenizer, o.max_length);
  tenax::sdk::TokenizedTextDataset validation(validation_records, labels, tokenizer, o.max_length);
  tenax::sdk::TokenizedTextDataset test(test_records, labels, tokenizer, o.max_length);

  tenax::sdk::Id2Label id2label;
  for (const auto& n : labels.names()) id2label[labels.id(n)] = n;
  torch::manual_seed(o.args.seed);  // the new classifier head: the same on every rank
  const std::string model_type = tenax::sdk::AutoModelForClassification::model_type(o.model_dir);
  if (o.model_type != "auto" && o.model_type != model_type) {
    throw tenax::ConfigError("--model-type " + o.model_type + ": " + o.model_dir + "/config.json is a \"" + model_type +
                             "\" model; pass that directory's family or --model-type auto");
  }
  if (model_type != "bert" && model_type != "distilbert") {
    throw tenax::ConfigError(o.model_dir + "/config.json is a \"" + model_type +
                             "\" model; finetune_text trains the text families (bert, distilbert)");
  }
  auto model = tenax::sdk::AutoModelForClassification::from_pretrained(
      o.model_dir,
      tenax::sdk::PretrainedOptions().id2label(id2label).ignore_mismatched_sizes(o.ignore_mismatched_sizes));
  // Everything above is the same on every rank and needs no peer: it is loaded before the
  // WorkerContext, so that a warm spare (`tenax run --recovery in-process`) has it ready when it
  // is given a lost rank's place and only has to heal.
  auto context = tenax::elastic::WorkerContext::from_env();
  tenax::set_log_identity({context.rank(), static_cast<int>(context.generation()), "worker"});
  auto log = tenax::logger("example", tenax::LogPolicy::kRankZeroOnly);
  if (o.fail_at_step >= 0 && (o.fail_rank < 0 || o.fail_rank >= context.world_size())) {
    throw tenax::ConfigError("--fail-rank " + std::to_string(o.fail_rank) + " is not a rank of this world (size " +
                             std::to_string(context.world_size()) + ")");
  }
  std::string names;
  for (const auto& n : labels.names()) names += (names.empty() ? "" : ", ") + n + "=" + std::to_string(labels.id(n));
  log->info("data {}: train {} / validation {} / test {} texts; labels {}", o.data_dir, train->size(),
            validation.size(), test.size(), names);
  log->info("train {}", length_summary(*train, o.max_length));
  std::int64_t parameters = 0;
  for (const auto& p : model->parameters()) parameters += p.numel();
  log->info("model {}: {} ({} parameters), {} labels", o.model_dir, model->info().architecture, parameters,
            id2label.size());

  tenax::sdk::Trainer trainer(model, o.args, train, context, tenax::sdk::text_collator(tokenizer.pad_id()));
  if (o.fail_at_step >= 0) {
    trainer.add_callback(std::make_shared<tenax::sdk::FailureInjection>(o.fail_at_step, static_cast<int>(o.fail_rank),
                                                                        context.restart_count()));
  }
  if (o.preempt_at_step >= 0) {
    trainer.add_callback(
        std::make_shared<tenax::sdk::PreemptionInjection>(o.preempt_at_step, o.preempt_signal_number()));
  }
  if (auto profile = tenax::examples::ProfileSteps::from_env()) trainer.add_callback(profile);
  const tenax::sdk::TrainOutput trained = trainer.train();
  if (trained.preempted) {
    context.finalize();
    return tenax::kExitPreempted;
  }

  const auto eval = trainer.evaluate(validation, classification_metrics);
  const auto predicted = trainer.predict(test, classification_metrics, "test");
  const auto& m = predicted.metrics;
  log->info("held-out test: accuracy {:.4f} | F1 ({}) {:.4f} | MCC {:.4f} on {} texts (validation accuracy {:.4f})",
            m.at("test_accuracy"), labels.name(1), m.at("test_f1"), m.at("test_mcc"), test.size(),
            eval.at("eval_accuracy"));

  if (context.rank() == 0) {
    const fs::path model_dir = fs::path(o.args.output_dir) / "model";
    model->save_pretrained(model_dir);
    log->info("fine-tuned model written to {}", model_dir.string());
    const nlohmann::json result = {{"test_accuracy", m.at("test_accuracy")},
                                   {"test_f1", m.at("test_f1")},
                                   {"test_mcc", m.at("test_mcc")},
                                   {"eval_accuracy", eval.at("eval_accuracy")},
                                   {"train_samples_per_second", trained.train_samples_per_second},
                                   {"train_runtime_s", trained.train_runtime_s},
                                   {"eval_runtime_s", m.at("test_runtime")},
                                   {"global_step", trained.global_step},
                                   {"resumed_from_step", trained.resumed_from_step},
                                   {"world_size", context.world_size()}};
    std::cout << "TENAX_RESULT " << result.dump() << std::endl;
  }
  context.finalize();
  return tenax::kExitDone;
}

}  // namespace

int main(int argc, char** argv) {
  const FinetuneOptions options = tenax::examples::parse_options(argc, argv);
  return tenax::examples::run_example("finetune_text", [&options] { return run(options); });
}
