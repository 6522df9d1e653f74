// The configuration of examples/finetune_text: TrainingArguments plus the example's own
// settings, from an optional TOML file (`--config FILE.toml`: TrainingArguments keys at the top
// level, the example's keys in a [finetune] table) and `--key value` flags, which win. A bad key
// or value is a configuration error: parse_options prints it and exits 2 (the launcher does not
// restart a job whose workers exit 2).
#pragma once

#include <cstdint>
#include <string>

#include "tenax/sdk/training_arguments.h"

namespace tenax::examples {

struct FinetuneOptions {
  sdk::TrainingArguments args;
  std::string model_dir;  ///< a Hugging Face model directory of a registered family
  /// "auto" (config.json's model_type) or a family, "bert" or "distilbert", that config.json
  /// must then name (a check that the directory is the model meant).
  std::string model_type = "auto";
  /// Re-initialise checkpoint tensors of another shape (a head trained for other labels)
  /// instead of failing: transformers' ignore_mismatched_sizes, as run_glue.py offers it.
  bool ignore_mismatched_sizes = false;
  std::string data_dir;  ///< {train,validation,test}.csv with columns text,label
  std::int64_t max_length = 64;
  std::int64_t threads = 1;        ///< torch intra-op threads per rank
  std::int64_t train_limit = 0;    ///< first N training rows only (0: all)
  std::int64_t eval_limit = 0;     ///< first N validation and test rows only (0: all)
  std::int64_t fail_at_step = -1;  ///< -1: no injected failure
  std::int64_t fail_rank = 0;
  std::int64_t preempt_at_step = -1;    ///< -1: no injected preemption
  std::string preempt_signal = "USR1";  ///< USR1 or TERM

  /// The example's own settings (not `args`), by name: the [finetune] table and their --flags.
  template <typename Field>
  void for_each_own_field(Field&& field) {
    field("model_dir", model_dir);
    field("model_type", model_type);
    field("ignore_mismatched_sizes", ignore_mismatched_sizes);
    field("data_dir", data_dir);
    field("max_length", max_length);
    field("threads", threads);
    field("train_limit", train_limit);
    field("eval_limit", eval_limit);
    field("fail_at_step", fail_at_step);
    field("fail_rank", fail_rank);
    field("preempt_at_step", preempt_at_step);
    field("preempt_signal", preempt_signal);
  }
  /// SIGUSR1 or SIGTERM.
  int preempt_signal_number() const;
};

/// Parses argv; on --help prints the usage and exits 0, with --print-config prints the resolved
/// configuration as TOML and exits 0, on a bad flag, file, key or value exits 2 naming it.
FinetuneOptions parse_options(int argc, char** argv);

}  // namespace tenax::examples
