// The configuration of `tenax train`: TrainingArguments at the top level of a TOML job file
// (Hugging Face's names and meanings) and four tables of the job's own, with the names of
// transformers' run_classification.py where it has one:
//
//   [model]    model_name_or_path, model_type, problem_type, ignore_mismatched_sizes
//   [data]     text: train_file, validation_file, test_file, format, text_column_names,
//              label_column_name, label_separator, max_seq_length; images: train_dir,
//              validation_dir, test_dir (image folders) or train_file, ... with format idx,
//              augment, crop_scale_min/max, crop_ratio_min/max, flip_probability; both:
//              label_names, max_train_samples, max_eval_samples, max_predict_samples
//   [metrics]  metric_name, average, pos_label
//   [run]      threads, and the drills (tenax/sdk/callbacks/fault_drills.h): fail_at_step,
//              fail_rank, fail_signal (SIGKILL or SIGSTOP a rank), preempt_at_step with
//              preempt_signal (a preemption), for demos and fire drills
//
// Every key can be overridden after the file: `key=value`, `table.key=value`, `--key value`.
// Strings that name a choice (problem_type, average, metric names, format, preempt_signal) are
// parsed into enums here, once; a bad one is a ConfigError naming the key (exit 2).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tenax/sdk/metrics.h"
#include "tenax/sdk/models/pretrained_config.h"
#include "tenax/sdk/text_dataset.h"
#include "tenax/sdk/training_arguments.h"

namespace tenax::train {

struct ModelOptions {
  /// A Hugging Face model directory (config.json's model_type); without model.safetensors the
  /// model is built from config.json and trained from scratch.
  std::string model_name_or_path;
  std::string model_type = "auto";
  /// auto (from the labels, as run_classification.py), single_label_classification,
  /// multi_label_classification, regression.
  std::string problem_type = "auto";
  bool ignore_mismatched_sizes = false;

  template <typename Field>
  void for_each_field(Field&& field) {
    field("model_name_or_path", model_name_or_path);
    field("model_type", model_type);
    field("problem_type", problem_type);
    field("ignore_mismatched_sizes", ignore_mismatched_sizes);
  }
};

struct DataOptions {
  // Text: files of rows.
  std::string train_file;
  std::string validation_file;  ///< evaluated per eval_strategy and after training; optional
  std::string test_file;        ///< evaluated once at the end (test_results.json); optional
  /// auto (by extension; IDX by MNIST's names, *-images-idx3-ubyte[.gz]), csv, tsv, jsonl, parquet, idx.
  /// idx: train_file, validation_file and test_file are IDX images files, each with its
  /// *-labels-idx1-ubyte[.gz] beside it (MNIST, Fashion-MNIST, KMNIST): an image job.
  std::string format = "auto";
  /// One column, or two for a text pair (run_classification.py's text_column_names).
  std::vector<std::string> text_column_names = {"text"};
  std::string label_column_name = "label";
  /// The label list in id order; empty: the labels of train_file, sorted (integers by value).
  std::vector<std::string> label_names;
  /// Multi-label fields in CSV/TSV: the labels joined by this ("|"); JSON Lines can use arrays.
  std::string label_separator;
  std::int64_t max_seq_length = 128;
  std::int64_t max_train_samples = 0;  ///< first N rows only (0: all); images: N spread over the classes
  std::int64_t max_eval_samples = 0;
  std::int64_t max_predict_samples = 0;
  // Images: folders ROOT/CLASS/IMAGE.png|jpg (run_image_classification.py's train_dir, ...).
  std::string train_dir;
  std::string validation_dir;
  std::string test_dir;
  bool augment = true;  ///< RandomResizedCrop + horizontal flip on the training images
  double crop_scale_min = 0.08;
  double crop_scale_max = 1.0;
  double crop_ratio_min = 3.0 / 4.0;
  double crop_ratio_max = 4.0 / 3.0;
  double flip_probability = 0.5;

  template <typename Field>
  void for_each_field(Field&& field) {
    field("train_file", train_file);
    field("validation_file", validation_file);
    field("test_file", test_file);
    field("format", format);
    field("text_column_names", text_column_names);
    field("label_column_name", label_column_name);
    field("label_names", label_names);
    field("label_separator", label_separator);
    field("max_seq_length", max_seq_length);
    field("max_train_samples", max_train_samples);
    field("max_eval_samples", max_eval_samples);
    field("max_predict_samples", max_predict_samples);
    field("train_dir", train_dir);
    field("validation_dir", validation_dir);
    field("test_dir", test_dir);
    field("augment", augment);
    field("crop_scale_min", crop_scale_min);
    field("crop_scale_max", crop_scale_max);
    field("crop_ratio_min", crop_ratio_min);
    field("crop_ratio_max", crop_ratio_max);
    field("flip_probability", flip_probability);
  }
};

struct MetricOptions {
  /// accuracy, f1, precision, recall, matthews_correlation, pearson, spearman, mse; empty: the
  /// task's default (accuracy; f1 for multi-label; mse for regression).
  std::vector<std::string> metric_name;
  /// auto (binary for two classes, macro for more, micro for multi-label), binary, micro,
  /// macro, weighted: sklearn's average for f1, precision and recall.
  std::string average = "auto";
  std::int64_t pos_label = 1;  ///< the positive class id of average binary

  template <typename Field>
  void for_each_field(Field&& field) {
    field("metric_name", metric_name);
    field("average", average);
    field("pos_label", pos_label);
  }
};

struct RunOptions {
  std::int64_t threads = 1;  ///< torch intra-op threads per rank
  std::int64_t fail_at_step = -1;
  std::int64_t fail_rank = 0;
  std::string fail_signal = "KILL";  ///< KILL, or STOP: a hung rank (for tenax run --hang-timeout)
  std::int64_t preempt_at_step = -1;
  std::string preempt_signal = "USR1";  ///< USR1 or TERM

  template <typename Field>
  void for_each_field(Field&& field) {
    field("threads", threads);
    field("fail_at_step", fail_at_step);
    field("fail_rank", fail_rank);
    field("fail_signal", fail_signal);
    field("preempt_at_step", preempt_at_step);
    field("preempt_signal", preempt_signal);
  }
};

enum class Metric { kAccuracy, kF1, kPrecision, kRecall, kMatthewsCorrelation, kPearson, kSpearman, kMse };
/// The name a metric's value is reported under (before the eval_/test_ prefix).
const char* metric_name(Metric metric);

/// What the job trains on: rows of text (data.train_file) or images (data.train_dir, or IDX
/// files in data.train_file).
enum class Modality { kText, kImage };
/// Where an image job's images are: an image folder (ROOT/CLASS/IMAGE) or MNIST-style IDX files.
enum class ImageSource { kFolder, kIdx };

/// What the string options say, parsed once.
struct ParsedChoices {
  Modality modality = Modality::kText;
  ImageSource image_source = ImageSource::kFolder;  ///< image jobs only
  std::optional<sdk::ProblemType> problem_type;     ///< nullopt: infer from the training labels
  sdk::TextFileFormat format = sdk::TextFileFormat::kAuto;
  std::vector<Metric> metrics;          ///< empty: the task's default
  std::optional<sdk::Average> average;  ///< nullopt: by the task
  int fail_signal = 0;
  int preempt_signal = 0;
};

struct JobOptions {
  sdk::TrainingArguments args;
  ModelOptions model;
  DataOptions data;
  MetricOptions metrics;
  RunOptions run;
  ParsedChoices choices;
  std::string job_file;  ///< the TOML file it came from ("" when none)
};

/// What to do about a path of the job that is missing, when it lies in a `.assets` directory:
/// the shipped jobs (train/jobs/) read their model and data from the repository's .assets/,
/// which tools/fetch_assets.sh fills; "" for any other path. Appended to the error that names it.
std::string fetch_assets_hint(const std::string& path);

/// argv of `tenax train`: `[JOB.toml] [key=value | table.key=value | --key value]... [--print-config]`.
/// --help prints the usage and the keys, --print-config the resolved TOML (both exit 0); a bad
/// file, key or value prints "tenax train: configuration error: ..." and exits 2.
JobOptions parse_job_options(int argc, char** argv);

}  // namespace tenax::train
