#include "job_options.h"

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <utility>

#include "tenax/core/error.h"
#include "tenax/core/exit_codes.h"
#include "tenax/sdk/training_arguments_io.h"

namespace tenax::train {
namespace {

constexpr const char* kUsage =
    "usage: tenax train [JOB.toml] [KEY=VALUE | TABLE.KEY=VALUE | --KEY VALUE]... [--print-config]\n"
    "Fine-tunes a Hugging Face model directory (BERT, DistilBERT on text: CSV, TSV, JSON Lines;\n"
    "ViT on an image folder) — single-label or multi-label classification, or regression — or\n"
    "trains one from its config.json alone, with the job in a TOML file. Run it as the workers of\n"
    "`tenax run` (fault tolerance, restarts, requeue), or directly under srun/mpirun:\n"
    "  tenax run --nproc-per-node 2 -- tenax train job.toml learning_rate=3e-5\n"
    "  JOB.toml            TrainingArguments at the top level (Hugging Face's names; nested ones as\n"
    "                      tables: [lr_scheduler_kwargs]); the job's own keys in the tables\n"
    "                      [model], [data], [metrics], [run]. train/jobs/ has examples. Without\n"
    "                      a file, the keys on the command line are the whole job.\n"
    "  KEY=VALUE           any key below, after the file: num_train_epochs=3, data.max_seq_length=64,\n"
    "                      --learning_rate 3e-5 (the command line beats the file, which beats the\n"
    "                      defaults; lists comma-separated: metrics.metric_name=accuracy,f1)\n"
    "  --print-config      print the resolved job as TOML and exit\n"
    "  --help              this text\n"
    "Writes to output_dir: checkpoints, train_results.json, eval_results.json, test_results.json,\n"
    "all_results.json, trainer_state.json, and model/: the fine-tuned model in Hugging Face layout.\n"
    "Exit: 0 done, 2 configuration or data error (nothing is retried), 3 preempted (requeue), 1 failure.\n"
    "Keys, types and defaults:\n";

void require(bool ok, const std::string& key, const std::string& why) {
  if (!ok) throw ConfigError(key + ": " + why);
}

std::optional<sdk::ProblemType> parse_problem_type(const std::string& name) {
  if (name == "auto") return std::nullopt;
  for (auto type : {sdk::ProblemType::kSingleLabelClassification, sdk::ProblemType::kMultiLabelClassification,
                    sdk::ProblemType::kRegression}) {
    if (name == sdk::problem_type_name(type)) return type;
  }
  throw ConfigError("model.problem_type: '" + name +
                    "' is not one of auto, single_label_classification, multi_label_classification, regression");
}

sdk::TextFileFormat parse_format(const std::string& name) {
  if (name == "auto") return sdk::TextFileFormat::kAuto;
  if (name == "csv") return sdk::TextFileFormat::kCsv;
  if (name == "tsv") return sdk::TextFileFormat::kTsv;
  if (name == "jsonl" || name == "json") return sdk::TextFileFormat::kJsonl;
  if (name == "parquet") return sdk::TextFileFormat::kParquet;
  throw ConfigError("data.format: '" + name + "' is not one of auto (by extension), csv, tsv, jsonl, parquet, idx");
}

// MNIST's names for its images files: train-images-idx3-ubyte, t10k-images-idx3-ubyte.gz.
bool is_idx_name(const std::string& path) { return path.find("images-idx3-ubyte") != std::string::npos; }

constexpr Metric kMetrics[] = {Metric::kAccuracy, Metric::kF1,       Metric::kPrecision,           Metric::kRecall,
                               Metric::kPearson,  Metric::kSpearman, Metric::kMatthewsCorrelation, Metric::kMse};

Metric parse_metric(const std::string& name) {
  if (name == "mcc" || name == "matthews_corrcoef") return Metric::kMatthewsCorrelation;
  if (name == "pearsonr") return Metric::kPearson;
  if (name == "spearmanr") return Metric::kSpearman;
  std::string known;
  for (Metric m : kMetrics) {
    if (name == metric_name(m)) return m;
    known += std::string(known.empty() ? "" : ", ") + metric_name(m);
  }
  throw ConfigError("metrics.metric_name: '" + name + "' is not a metric Tenax computes (" + known + ")");
}

void validate(JobOptions& o) {
  require(!o.model.model_name_or_path.empty(), "model.model_name_or_path",
          "is required: a Hugging Face model directory (config.json, model.safetensors, vocab.txt)");
  require(o.model.model_type == "auto" || o.model.model_type == "bert" || o.model.model_type == "distilbert" ||
              o.model.model_type == "vit",
          "model.model_type", "must be auto, bert, distilbert or vit, got '" + o.model.model_type + "'");
  require(o.data.train_file.empty() != o.data.train_dir.empty(), "data.train_file / data.train_dir",
          "exactly one is required: train_file for text (.csv, .tsv, .jsonl, .parquet) or IDX images, train_dir for an "
          "image "
          "folder");
  const bool idx = o.data.format == "idx" || (o.data.format == "auto" && is_idx_name(o.data.train_file));
  const bool folder = !o.data.train_dir.empty();
  o.choices.modality = folder || idx ? Modality::kImage : Modality::kText;
  o.choices.image_source = idx ? ImageSource::kIdx : ImageSource::kFolder;
  require(!folder || (o.data.validation_file.empty() && o.data.test_file.empty()), "data.validation_file",
          "is for jobs that read files (text, or IDX with data.format = \"idx\"); an image folder job's splits are "
          "data.validation_dir and data.test_dir");
  require(folder || (o.data.validation_dir.empty() && o.data.test_dir.empty()), "data.validation_dir",
          "is for image folder jobs (data.train_dir); a job that reads files has data.validation_file and "
          "data.test_file");
  require(o.data.crop_scale_min > 0 && o.data.crop_scale_min <= o.data.crop_scale_max && o.data.crop_scale_max <= 1,
          "data.crop_scale_min / crop_scale_max", "must satisfy 0 < min <= max <= 1");
  require(o.data.crop_ratio_min > 0 && o.data.crop_ratio_min <= o.data.crop_ratio_max,
          "data.crop_ratio_min / crop_ratio_max", "must satisfy 0 < min <= max");
  require(o.data.flip_probability >= 0 && o.data.flip_probability <= 1, "data.flip_probability", "must be in [0, 1]");
  require(o.data.text_column_names.size() == 1 || o.data.text_column_names.size() == 2, "data.text_column_names",
          "must name one text column, or two for a text pair; got " + std::to_string(o.data.text_column_names.size()));
  require(!o.data.label_column_name.empty(), "data.label_column_name", "must name the label column");
  require(o.data.max_seq_length >= 3 && o.data.max_seq_length <= 512, "data.max_seq_length",
          "must be in [3, 512] (the model's max_position_embeddings bounds it too), got " +
              std::to_string(o.data.max_seq_length));
  for (const auto& [key, value] : {std::pair{"max_train_samples", o.data.max_train_samples},
                                   std::pair{"max_eval_samples", o.data.max_eval_samples},
                                   std::pair{"max_predict_samples", o.data.max_predict_samples}}) {
    require(value >= 0, std::string("data.") + key, "must be >= 0 (0: all), got " + std::to_string(value));
  }
  require(o.run.threads >= 1, "run.threads", "must be >= 1, got " + std::to_string(o.run.threads));
  require(o.run.fail_at_step == -1 || o.run.fail_at_step >= 1, "run.fail_at_step",
          "must be >= 1 (or -1: none), got " + std::to_string(o.run.fail_at_step));
  require(o.run.fail_rank >= 0, "run.fail_rank", "must be >= 0, got " + std::to_string(o.run.fail_rank));
  require(o.run.preempt_at_step == -1 || o.run.preempt_at_step >= 1, "run.preempt_at_step",
          "must be >= 1 (or -1: none), got " + std::to_string(o.run.preempt_at_step));
  require(o.run.fail_signal == "KILL" || o.run.fail_signal == "STOP", "run.fail_signal",
          "must be KILL or STOP, got '" + o.run.fail_signal + "'");
  require(o.run.preempt_signal == "USR1" || o.run.preempt_signal == "TERM", "run.preempt_signal",
          "must be USR1 or TERM, got '" + o.run.preempt_signal + "'");

  o.choices.problem_type = parse_problem_type(o.model.problem_type);
  o.choices.format = idx ? sdk::TextFileFormat::kAuto : parse_format(o.data.format);
  o.choices.metrics.clear();
  for (const auto& name : o.metrics.metric_name) o.choices.metrics.push_back(parse_metric(name));
  o.choices.average = o.metrics.average == "auto" ? std::nullopt : std::optional(sdk::parse_average(o.metrics.average));
  o.choices.fail_signal = o.run.fail_signal == "STOP" ? SIGSTOP : SIGKILL;
  o.choices.preempt_signal = o.run.preempt_signal == "TERM" ? SIGTERM : SIGUSR1;
}

// The job file is the first word, when it is not an option (--key, key=value); every other
// word is an override for ArgumentParser, which reads key=value, --key=value and --key value.
std::vector<std::string> split_job_file(const std::vector<std::string>& words, std::string& job_file) {
  if (words.empty() || words[0].rfind("-", 0) == 0 || words[0].find('=') != std::string::npos) return words;
  job_file = words[0];
  return {words.begin() + 1, words.end()};
}

}  // namespace

const char* metric_name(Metric metric) {
  switch (metric) {
    case Metric::kAccuracy: return "accuracy";
    case Metric::kF1: return "f1";
    case Metric::kPrecision: return "precision";
    case Metric::kRecall: return "recall";
    case Metric::kMatthewsCorrelation: return "matthews_correlation";
    case Metric::kPearson: return "pearson";
    case Metric::kSpearman: return "spearman";
    case Metric::kMse: return "mse";
  }
  return "?";
}

std::string fetch_assets_hint(const std::string& path) {
  for (const auto& part : std::filesystem::path(path)) {
    if (part == ".assets") {
      return " (the shipped jobs' model and data: fetch them with `bash tools/fetch_assets.sh`, or `make "
             "demo-assets`, in the repository root)";
    }
  }
  return "";
}

JobOptions parse_job_options(int argc, char** argv) {
  JobOptions o;
  bool print_config = false;
  std::vector<std::string> words;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--print-config") {
      print_config = true;
    } else {
      words.push_back(a);
    }
  }
  sdk::ArgumentParser parser(o.args);
  parser.add_section("model", [&o](auto&& field) { o.model.for_each_field(field); });
  parser.add_section("data", [&o](auto&& field) { o.data.for_each_field(field); });
  parser.add_section("metrics", [&o](auto&& field) { o.metrics.for_each_field(field); });
  parser.add_section("run", [&o](auto&& field) { o.run.for_each_field(field); });
  for (const auto& w : words) {
    if (w == "--help" || w == "-h") {
      std::cout << kUsage << parser.keys_help();
      std::exit(kExitDone);
    }
  }
  try {
    const std::vector<std::string> flags = split_job_file(words, o.job_file);
    if (!o.job_file.empty()) parser.load_toml_file(o.job_file);
    parser.apply_overrides(flags);
    o.args.validate();
    validate(o);
  } catch (const ConfigError& e) {
    std::cerr << "tenax train: configuration error: " << e.what() << "\n(tenax train --help lists the keys)\n";
    std::exit(kExitUsage);
  }
  if (print_config) {
    std::cout << parser.to_toml();
    std::exit(kExitDone);
  }
  return o;
}

}  // namespace tenax::train
