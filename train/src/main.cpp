// tenax train: fine-tunes a Hugging Face model (text: BERT, DistilBERT; images: ViT) from a TOML
// job file, or trains one from its config.json alone; no C++ to write.
// The program `tenax train` runs (the launcher execs it); run as the workers of `tenax run` it
// gets restarts, in-process recovery and requeue, and directly under srun/mpirun it runs as
// any Tenax worker. job_options.h lists the keys; train/jobs/ holds shipped jobs.
//
// What it writes to output_dir, as transformers' run_classification.py does: the checkpoints,
// train_results.json, eval_results.json (data.validation_file), test_results.json
// (data.test_file), all_results.json, trainer_state.json (log_history, best_model_checkpoint)
// and, in <output_dir>/model, the fine-tuned model in Hugging Face layout (config.json with
// id2label/label2id and problem_type, model.safetensors, tokenizer or image processor files), which transformers
// loads.
//
// TENAX_PROFILE_TRACE (and TENAX_PROFILE_STEPS) profile a window of steps: profile_steps.h,
// for bench/profile_finetune.sh.
//
// Exit codes: 0 done, 2 configuration or data error (before any rank trains), 3 preempted, 1 failure.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <torch/torch.h>

#include "tenax/sdk/callbacks/fault_drills.h"
#include "job_options.h"
#include "tenax/core/error.h"
#include "tenax/core/exit_codes.h"
#include "tenax/core/logging.h"
#include "tenax/elastic/worker_context.h"
#include "tenax/sdk/models/auto_model.h"
#include "tenax/core/files.h"
#include "tenax/sdk/vision/vit_image_processor.h"
#include "tenax/sdk/trainer.h"
#include "image_data.h"
#include "profile_steps.h"
#include "text_data.h"
#include "text_metrics.h"

namespace {

namespace fs = std::filesystem;
using tenax::ConfigError;
using tenax::train::JobOptions;

// The model directory and what it holds, checked before anything is read from it.
struct ModelDir {
  std::string type;          ///< config.json's model_type
  bool has_weights = false;  ///< model.safetensors: fine-tune; absent: train from config.json
};

ModelDir require_model_dir(const JobOptions& o) {
  const fs::path dir = o.model.model_name_or_path;
  const bool text = o.choices.modality == tenax::train::Modality::kText;
  for (const char* file : {"config.json", text ? "vocab.txt" : nullptr}) {
    if (file != nullptr && !fs::is_regular_file(dir / file)) {
      throw ConfigError("model.model_name_or_path: " + (dir / file).string() +
                        " is missing; give a Hugging Face model directory (save_pretrained's layout" +
                        (text ? std::string(", with a WordPiece vocab.txt)") : std::string(")")) +
                        tenax::train::fetch_assets_hint(dir.string()));
    }
  }
  ModelDir found{tenax::sdk::AutoModelForClassification::model_type(dir.string()),
                 fs::is_regular_file(dir / "model.safetensors")};
  if (o.model.model_type != "auto" && o.model.model_type != found.type) {
    throw ConfigError("model.model_type: " + o.model.model_type + ", but " + (dir / "config.json").string() +
                      " is a \"" + found.type + "\" model; name that family or auto");
  }
  const bool text_family = found.type == "bert" || found.type == "distilbert";
  if (text != text_family || (!text && found.type != "vit")) {
    throw ConfigError((dir / "config.json").string() + " is a \"" + found.type + "\" model, and this job's data is " +
                      (text ? "text (data.train_file): use a bert or distilbert model" : "images: use a vit model"));
  }
  return found;
}

// An evaluation the job asks for needs the split it evaluates, and the best model needs a
// metric that is computed: said now, not after the first epoch.
void check_evaluation(const JobOptions& o, const tenax::train::JobData& data, const tenax::train::MetricPlan& plan) {
  using tenax::sdk::IntervalStrategy;
  const bool evaluates =
      o.args.eval_strategy != IntervalStrategy::kNo || o.args.load_best_model_at_end || o.args.eval_on_start;
  if (evaluates && !data.validation) {
    throw ConfigError(
        "eval_strategy / load_best_model_at_end evaluate during training, which needs "
        "data.validation_file; set it, or eval_strategy = \"no\"");
  }
  std::string metric = o.args.metric_for_best_model;
  if (metric.rfind("eval_", 0) == 0) metric = metric.substr(5);
  if (metric.empty() || metric == "loss") return;
  std::string known = "loss";
  for (auto m : plan.metrics) {
    if (metric == tenax::train::metric_name(m)) return;
    known += std::string(", ") + tenax::train::metric_name(m);
  }
  throw ConfigError("metric_for_best_model: '" + o.args.metric_for_best_model + "' is not computed by this job (" +
                    known + "); add it to metrics.metric_name");
}

int run(const JobOptions& o) {
  torch::set_num_threads(static_cast<int>(o.run.threads));
  // Bench tooling (bench/profile_finetune.sh), off unless TENAX_PROFILE_TRACE is set; read first
  // so that a bad TENAX_PROFILE_STEPS stops the job before anything is loaded.
  const std::shared_ptr<tenax::train::ProfileSteps> profile = tenax::train::ProfileSteps::from_env();
  const ModelDir model_dir = require_model_dir(o);
  std::optional<tenax::sdk::ViTImageProcessor> processor;
  tenax::train::JobData data;
  if (o.choices.modality == tenax::train::Modality::kText) {
    data = tenax::train::load_text_data(o, tenax::sdk::BertTokenizer::from_pretrained(o.model.model_name_or_path));
  } else {
    processor = tenax::sdk::ViTImageProcessor::from_pretrained(o.model.model_name_or_path);
    data = tenax::train::load_image_data(o, *processor);
  }
  const tenax::train::MetricPlan plan =
      tenax::train::plan_metrics(o.choices, o.metrics.pos_label, data.problem_type, data.num_labels());
  check_evaluation(o, data, plan);

  tenax::sdk::PretrainedOptions pretrained;
  pretrained.problem_type(data.problem_type).ignore_mismatched_sizes(o.model.ignore_mismatched_sizes);
  if (data.label_names.empty()) {
    pretrained.num_labels(1);
  } else {
    tenax::sdk::Id2Label id2label;
    for (std::size_t i = 0; i < data.label_names.size(); ++i)
      id2label[static_cast<std::int64_t>(i)] = data.label_names[i];
    pretrained.id2label(id2label);
  }
  torch::manual_seed(o.args.seed);  // the new classifier head (or the whole model): the same on every rank
  auto model = model_dir.has_weights
                   ? tenax::sdk::AutoModelForClassification::from_pretrained(o.model.model_name_or_path, pretrained)
                   : tenax::sdk::AutoModelForClassification::from_config(o.model.model_name_or_path, pretrained);

  // Everything above needs no peer: a warm spare (`tenax run --recovery in-process`) has it
  // ready when it takes a lost rank's place.
  auto context = tenax::elastic::WorkerContext::from_env();
  tenax::set_log_identity({context.rank(), static_cast<int>(context.generation()), "worker"});
  auto log = tenax::logger("tenax.train", tenax::LogPolicy::kRankZeroOnly);
  if (o.run.fail_at_step >= 0 && o.run.fail_rank >= context.world_size()) {
    throw ConfigError("run.fail_rank: " + std::to_string(o.run.fail_rank) + " is not a rank of this world (size " +
                      std::to_string(context.world_size()) + ")");
  }
  std::string labels;
  for (std::size_t i = 0; i < data.label_names.size(); ++i) {
    labels += (i == 0 ? "" : ", ") + data.label_names[i] + "=" + std::to_string(i);
  }
  log->info("job {}: {} {} model {} ({}{}); {}; {}", o.job_file.empty() ? "(command line)" : o.job_file,
            tenax::sdk::problem_type_name(data.problem_type), model_dir.type, o.model.model_name_or_path,
            model->info().architecture,
            model_dir.has_weights ? "" : ", no model.safetensors: trained from config.json, from scratch",
            labels.empty() ? "one output" : "labels " + labels, data.summary);

  tenax::sdk::Trainer trainer(model, o.args, data.train, context, data.collator);
  const tenax::sdk::ComputeMetrics metrics = tenax::train::compute_metrics(plan);
  if (data.validation) trainer.set_eval_dataset(data.validation, metrics);
  if (o.run.fail_at_step >= 0) {
    trainer.add_callback(std::make_shared<tenax::sdk::FailureInjection>(
        o.run.fail_at_step, static_cast<int>(o.run.fail_rank), context.restart_count(), o.choices.fail_signal));
  }
  if (o.run.preempt_at_step >= 0) {
    trainer.add_callback(
        std::make_shared<tenax::sdk::PreemptionInjection>(o.run.preempt_at_step, o.choices.preempt_signal));
  }
  if (profile) trainer.add_callback(profile);
  const tenax::sdk::TrainOutput trained = trainer.train();
  if (trained.preempted) {
    context.finalize();
    return tenax::kExitPreempted;
  }
  // transformers' order: the model, the train metrics, the state, then evaluate and predict.
  // <output_dir>/model: save_pretrained replaces its directory whole (never a half-written
  // model), so the model cannot share output_dir with the checkpoints and results.
  if (context.rank() == 0) {
    const fs::path saved = fs::path(o.args.output_dir) / "model";
    model->save_pretrained(saved);
    // An image model needs its processor beside it; save_pretrained copied the model
    // directory's own, and a model trained from a bare config.json gets the one used here.
    if (processor && !fs::exists(saved / "preprocessor_config.json")) {
      tenax::files::atomic_write(saved / "preprocessor_config.json", processor->to_json_string());
    }
  }
  trainer.log_metrics("train", trained.metrics());
  trainer.save_metrics("train", trained.metrics());
  trainer.save_state();
  if (data.validation) {
    const auto eval = trainer.evaluate(*data.validation, metrics);
    trainer.log_metrics("eval", eval);
    trainer.save_metrics("eval", eval);
  }
  if (data.test) {
    const auto predicted = trainer.predict(*data.test, metrics, "test");
    trainer.log_metrics("test", predicted.metrics);
    trainer.save_metrics("test", predicted.metrics);
  }
  log->info("fine-tuned model and results written to {}", o.args.output_dir);
  context.finalize();
  return tenax::kExitDone;
}

}  // namespace

int main(int argc, char** argv) {
  const JobOptions options = tenax::train::parse_job_options(argc, argv);
  try {
    return run(options);
  } catch (const ConfigError& e) {
    std::cerr << "tenax train: configuration error: " << e.what() << "\n";
    return tenax::kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "tenax train: " << e.what() << "\n";
    return tenax::kExitFailure;
  }
}
