#include "options.h"

#include <csignal>
#include <cstdlib>

#include "example_cli.h"
#include "tenax/core/error.h"
#include "tenax/sdk/training_arguments_io.h"

namespace tenax::examples {
namespace {

// Relative to the working directory, as tools/fetch_assets.sh lays them out; TENAX_ASSETS moves
// the root as it does for that script.
std::string assets_root() {
  const char* env = std::getenv("TENAX_ASSETS");
  return env != nullptr && *env != '\0' ? env : ".assets";
}

constexpr const char* kUsage =
    "usage: finetune_text [--config FILE.toml] [--KEY VALUE]... [--print-config]\n"
    "Fine-tunes a BERT model (all-MiniLM-L6-v2) for text classification (Rotten Tomatoes).\n"
    "  --config FILE.toml  TrainingArguments keys at the top level of the file (nested ones as\n"
    "                      tables: [lr_scheduler_kwargs]), this program's keys in a [finetune]\n"
    "                      table. examples/finetune_text/finetune.toml is the `make demo` job.\n"
    "  --KEY VALUE         any key below; the command line beats the file, which beats the\n"
    "                      defaults. --learning_rate 3e-5, --learning-rate=3e-5 (dashes or\n"
    "                      underscores), --bf16 or --bf16 false, --report_to jsonl,tensorboard\n"
    "  --epochs X          the same as --num_train_epochs X\n"
    "  --print-config      print the resolved configuration as TOML and exit\n"
    "  --help              this text\n"
    "output_dir is required. model_dir and data_dir default to $TENAX_ASSETS/all-minilm-l6-v2 and\n"
    "$TENAX_ASSETS/data/rotten_tomatoes ($TENAX_ASSETS defaults to .assets; fetch them with\n"
    "`bash tools/fetch_assets.sh`). fail_at_step with fail_rank, and preempt_at_step with\n"
    "preempt_signal (USR1 or TERM), inject a failure or a preemption (tests, `make demo`).\n"
    "Unknown keys and bad values are errors (exit 2).\n"
    "Keys, types and defaults:\n";

void require(bool ok, const std::string& key, const std::string& why) {
  if (!ok) throw ConfigError("finetune." + key + ": " + why);
}

void validate(const FinetuneOptions& o) {
  require(!o.model_dir.empty(), "model_dir", "is required");
  require(!o.data_dir.empty(), "data_dir", "is required");
  require(
      o.max_length >= 3 && o.max_length <= 512, "max_length",
      "must be in [3, 512] (512: BERT's position embeddings; the model's max_position_embeddings bounds it too), got " +
          std::to_string(o.max_length));
  require(o.threads >= 1, "threads", "must be >= 1, got " + std::to_string(o.threads));
  require(o.train_limit >= 0, "train_limit", "must be >= 0 (0: all), got " + std::to_string(o.train_limit));
  require(o.eval_limit >= 0, "eval_limit", "must be >= 0 (0: all), got " + std::to_string(o.eval_limit));
  require(o.fail_at_step == -1 || o.fail_at_step >= 1, "fail_at_step",
          "must be >= 1 (or -1: none), got " + std::to_string(o.fail_at_step));
  require(o.fail_rank >= 0, "fail_rank", "must be >= 0, got " + std::to_string(o.fail_rank));
  require(o.preempt_at_step == -1 || o.preempt_at_step >= 1, "preempt_at_step",
          "must be >= 1 (or -1: none), got " + std::to_string(o.preempt_at_step));
  require(o.preempt_signal == "USR1" || o.preempt_signal == "TERM", "preempt_signal",
          "must be USR1 or TERM, got '" + o.preempt_signal + "'");
  require(o.model_type == "auto" || o.model_type == "bert" || o.model_type == "distilbert", "model_type",
          "must be one of auto, bert, distilbert (the text families), got '" + o.model_type + "'");
}

}  // namespace

int FinetuneOptions::preempt_signal_number() const { return preempt_signal == "TERM" ? SIGTERM : SIGUSR1; }

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

  sdk::ArgumentParser parser(o.args);
  parser.add_section("finetune", [&o](auto&& field) { o.for_each_own_field(field); });
  parse_example_command_line(parser, argc, argv, "finetune_text", kUsage, [&o] { validate(o); });
  return o;
}

}  // namespace tenax::examples
