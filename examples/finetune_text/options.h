// The command line of examples/finetune_text, parsed into TrainingArguments plus the example's
// own settings. A bad flag is a usage error: parse_options prints it with the usage and exits 2
// (the launcher does not restart a job whose workers exit 2).
#pragma once

#include <cstdint>
#include <string>

#include "tenax/sdk/training_arguments.h"

namespace tenax::examples {

struct FinetuneOptions {
  sdk::TrainingArguments args;
  std::string model_dir;          ///< a Hugging Face BERT directory
  std::string data_dir;           ///< {train,validation,test}.csv with columns text,label
  std::int64_t max_length = 64;
  int threads = 1;                ///< torch intra-op threads per rank
  std::int64_t train_limit = 0;   ///< first N training rows only (0: all)
  std::int64_t eval_limit = 0;    ///< first N validation and test rows only (0: all)
  std::int64_t fail_at_step = -1;
  int fail_rank = 0;
  std::int64_t preempt_at_step = -1;
  int preempt_signal = 0;         ///< SIGUSR1 or SIGTERM
};

/// Parses argv; on --help prints the usage and exits 0, on a bad flag exits 2 naming it.
FinetuneOptions parse_options(int argc, char** argv);

}  // namespace tenax::examples
