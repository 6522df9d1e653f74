// The callbacks every Trainer starts with, chosen by its arguments (transformers'
// DEFAULT_CALLBACKS + report_to):
//   - ProgressBarCallback on stderr, unless args.disable_tqdm;
//   - JsonlMetricsCallback for report_to "jsonl", TensorBoardCallback for "tensorboard", both
//     in args.resolved_logging_dir(); "none" adds nothing.
// Nothing is created on disk here: the loggers open their files at on_train_begin, on rank 0.
// Thread-safety: stateless.
//
//   for (auto& cb : tenax::sdk::default_callbacks(args)) trainer.add_callback(cb);
#pragma once

#include <memory>
#include <vector>

#include "tenax/sdk/trainer_callback.h"
#include "tenax/sdk/training_arguments.h"

namespace tenax::sdk {

/// The default callbacks for `args`, in the order above. Throws ConfigError naming report_to
/// for an unknown destination, or for "none" listed with others.
std::vector<std::shared_ptr<TrainerCallback>> default_callbacks(const TrainingArguments& args);

}  // namespace tenax::sdk
