#include "options.h"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <iostream>

#include "tenax/core/error.h"

namespace tenax::examples {
namespace {

// Relative to the working directory, as tools/fetch_assets.sh lays them out; TENAX_ASSETS moves
// the root as it does for that script.
std::string assets_root() {
  const char* env = std::getenv("TENAX_ASSETS");
  return env != nullptr && *env != '\0' ? env : ".assets";
}

constexpr const char* kUsage =
    "usage: finetune_text --output-dir DIR [--model-dir DIR] [--data-dir DIR]\n"
    "       [--epochs X] [--max-steps N] [--max-length N]\n"
    "       [--per-device-train-batch-size N] [--per-device-eval-batch-size N]\n"
    "       [--learning-rate X] [--weight-decay X] [--warmup-steps N] [--seed N]\n"
    "       [--save-steps N] [--save-total-limit N] [--logging-steps N] [--threads N]\n"
    "       [--train-limit N] [--eval-limit N]\n"
    "       [--fail-at-step S --fail-rank R] [--preempt-at-step S [--preempt-signal USR1|TERM]]\n"
    "defaults: --model-dir $TENAX_ASSETS/all-minilm-l6-v2, --data-dir $TENAX_ASSETS/data/rotten_tomatoes\n"
    "          ($TENAX_ASSETS defaults to .assets; fetch with `bash tools/fetch_assets.sh`), --epochs 1,\n"
    "          --max-length 64, --per-device-train-batch-size 16, --per-device-eval-batch-size 64,\n"
    "          --learning-rate 5e-5, --weight-decay 0, --warmup-steps 0, --seed 42, --save-steps 100,\n"
    "          --save-total-limit 2, --logging-steps 20, --threads 1\n";

[[noreturn]] void usage_error(const std::string& message) {
  std::cerr << "finetune_text: " << message << "\n" << kUsage;
  std::exit(2);
}

std::int64_t to_int(const std::string& flag, const std::string& value, std::int64_t min) {
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno != 0) usage_error(flag + " '" + value + "' is not an integer");
  if (x < min) usage_error(flag + " must be >= " + std::to_string(min) + ", got " + value);
  return x;
}

double to_double(const std::string& flag, const std::string& value, double min) {
  char* end = nullptr;
  const double x = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !(x == x)) usage_error(flag + " '" + value + "' is not a number");
  if (x < min) usage_error(flag + " must be >= " + std::to_string(min) + ", got " + value);
  return x;
}

}  // namespace

FinetuneOptions parse_options(int argc, char** argv) {
  FinetuneOptions o;
  o.model_dir = assets_root() + "/all-minilm-l6-v2";
  o.data_dir = assets_root() + "/data/rotten_tomatoes";
  // transformers' defaults (what bench/hf_trainer_finetune.py uses too), one epoch.
  o.args.num_train_epochs = 1.0;
  o.args.per_device_train_batch_size = 16;
  o.args.per_device_eval_batch_size = 64;
  o.args.learning_rate = 5e-5;
  o.args.save_steps = 100;
  o.args.save_total_limit = 2;  // a MiniLM checkpoint with AdamW moments is ~270 MB
  o.args.logging_steps = 20;
  o.preempt_signal = SIGUSR1;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::cout << kUsage;
      std::exit(0);
    }
    if (flag.rfind("--", 0) != 0) usage_error("unexpected argument '" + flag + "'");
    if (i + 1 >= argc) usage_error(flag + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--output-dir") o.args.output_dir = value;
    else if (flag == "--model-dir") o.model_dir = value;
    else if (flag == "--data-dir") o.data_dir = value;
    else if (flag == "--epochs") o.args.num_train_epochs = to_double(flag, value, 0.0);
    else if (flag == "--max-steps") o.args.max_steps = to_int(flag, value, -1);
    else if (flag == "--max-length") o.max_length = to_int(flag, value, 3);
    else if (flag == "--per-device-train-batch-size") o.args.per_device_train_batch_size = to_int(flag, value, 1);
    else if (flag == "--per-device-eval-batch-size") o.args.per_device_eval_batch_size = to_int(flag, value, 1);
    else if (flag == "--learning-rate") o.args.learning_rate = to_double(flag, value, 0.0);
    else if (flag == "--weight-decay") o.args.weight_decay = to_double(flag, value, 0.0);
    else if (flag == "--warmup-steps") o.args.warmup_steps = to_int(flag, value, 0);
    else if (flag == "--seed") o.args.seed = static_cast<std::uint64_t>(to_int(flag, value, 0));
    else if (flag == "--save-steps") o.args.save_steps = to_int(flag, value, 0);
    else if (flag == "--save-total-limit") o.args.save_total_limit = to_int(flag, value, 0);
    else if (flag == "--logging-steps") o.args.logging_steps = to_int(flag, value, 1);
    else if (flag == "--threads") o.threads = static_cast<int>(to_int(flag, value, 1));
    else if (flag == "--train-limit") o.train_limit = to_int(flag, value, 0);
    else if (flag == "--eval-limit") o.eval_limit = to_int(flag, value, 0);
    else if (flag == "--fail-at-step") o.fail_at_step = to_int(flag, value, 1);
    else if (flag == "--fail-rank") o.fail_rank = static_cast<int>(to_int(flag, value, 0));
    else if (flag == "--preempt-at-step") o.preempt_at_step = to_int(flag, value, 1);
    else if (flag == "--preempt-signal") {
      if (value != "USR1" && value != "TERM") usage_error("--preempt-signal must be USR1 or TERM, got " + value);
      o.preempt_signal = value == "USR1" ? SIGUSR1 : SIGTERM;
    } else {
      usage_error("unknown flag " + flag);
    }
  }
  if (o.args.output_dir.empty()) usage_error("--output-dir is required");
  if (o.args.max_steps <= 0 && o.args.num_train_epochs <= 0) usage_error("--epochs must be > 0 when --max-steps is not set");
  if (o.max_length > 512) usage_error("--max-length must be <= 512 (BERT's position embeddings), got " + std::to_string(o.max_length));
  return o;
}

}  // namespace tenax::examples
