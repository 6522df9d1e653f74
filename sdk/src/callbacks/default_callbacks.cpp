#include "tenax/sdk/callbacks/default_callbacks.h"

#include <algorithm>
#include <string>

#include "tenax/core/error.h"
#include "tenax/sdk/callbacks/jsonl_metrics.h"
#include "tenax/sdk/callbacks/progress_bar.h"
#include "tenax/sdk/callbacks/tensorboard.h"

namespace tenax::sdk {

std::vector<std::shared_ptr<TrainerCallback>> default_callbacks(const TrainingArguments& args) {
  std::vector<std::shared_ptr<TrainerCallback>> callbacks;
  if (!args.disable_tqdm) callbacks.push_back(std::make_shared<ProgressBarCallback>());

  const auto& report_to = args.report_to;
  const bool none = std::find(report_to.begin(), report_to.end(), "none") != report_to.end();
  if (none && report_to.size() > 1) {
    throw ConfigError("report_to: \"none\" cannot be combined with other destinations; use [\"none\"] alone");
  }
  bool jsonl = false;
  bool tensorboard = false;
  for (const std::string& destination : report_to) {
    if (destination == "jsonl") {
      jsonl = true;
    } else if (destination == "tensorboard") {
      tensorboard = true;
    } else if (destination != "none") {
      throw ConfigError("report_to: unknown destination \"" + destination +
                        "\"; accepted: \"jsonl\", \"tensorboard\", \"none\"");
    }
  }
  // Listed twice is still one logger.
  if (jsonl) callbacks.push_back(std::make_shared<JsonlMetricsCallback>(args.resolved_logging_dir()));
  if (tensorboard) callbacks.push_back(std::make_shared<TensorBoardCallback>(args.resolved_logging_dir()));
  return callbacks;
}

}  // namespace tenax::sdk
