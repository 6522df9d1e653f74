#include "embedded_arguments.h"

#include <functional>

#include "tenax/core/error.h"

namespace tenax::capi {
namespace {

struct Unembeddable {
  const char* key;
  /// True when the value asks for nothing the embedded trainer would have to do (eval_strategy
  /// = "no"); such a value is accepted. Null: every value is refused.
  std::function<bool(const sdk::TrainingArguments&)> inactive;
  const char* reason;
};

constexpr const char* kNoEvaluation =
    "an embedded trainer does not evaluate: it has no evaluation dataset (predict with tenax_predict on your arrays "
    "and log what you compute with tenax_log_metrics)";

const Unembeddable kUnembeddable[] = {
    {"num_train_epochs", nullptr,
     "an embedded trainer has no dataset to count epochs of: it takes one optimizer step per tenax_train_step call; "
     "max_steps sets the length of the learning-rate schedule"},
    {"per_device_eval_batch_size", nullptr, "tenax_predict runs on the batch it is given, whatever its size"},
    {"eval_strategy", [](const sdk::TrainingArguments& a) { return a.eval_strategy == sdk::IntervalStrategy::kNo; },
     kNoEvaluation},
    {"eval_steps", nullptr, kNoEvaluation},
    {"eval_on_start", [](const sdk::TrainingArguments& a) { return !a.eval_on_start; }, kNoEvaluation},
    {"metric_for_best_model", [](const sdk::TrainingArguments& a) { return a.metric_for_best_model.empty(); },
     kNoEvaluation},
    {"greater_is_better", nullptr, kNoEvaluation},
    {"load_best_model_at_end", [](const sdk::TrainingArguments& a) { return !a.load_best_model_at_end; },
     kNoEvaluation},
    {"save_steps", nullptr,
     "an embedded trainer saves when its caller calls tenax_checkpoint_save(step), labelled with the caller's step "
     "(save_strategy is \"no\")"},
    {"data_seed", [](const sdk::TrainingArguments& a) { return a.data_seed < 0; },
     "an embedded trainer has no data order to seed: the caller hands every batch"},
    {"ignore_data_skip", [](const sdk::TrainingArguments& a) { return !a.ignore_data_skip; },
     "an embedded trainer has no data order to start again: the caller hands every batch"},
    {"dataloader_drop_last", nullptr,
     "an embedded trainer has no data order whose last batch to keep or drop: the caller hands every batch"},
    {"group_by_length", [](const sdk::TrainingArguments& a) { return !a.group_by_length; },
     "an embedded trainer has no data order to group: the caller hands every batch"},
    {"include_num_input_tokens_seen", [](const sdk::TrainingArguments& a) { return !a.include_num_input_tokens_seen; },
     "the C API's batches are arrays, not tokens: count what your code feeds and log it with tenax_log_metrics"},
    {"restore_callback_states_from_checkpoint", nullptr, "the C API has no callbacks"},
};

}  // namespace

void refuse_unembeddable_arguments(const sdk::TrainingArguments& args, const std::set<std::string>& set_keys) {
  for (const Unembeddable& u : kUnembeddable) {
    if (set_keys.count(u.key) == 0 || (u.inactive && u.inactive(args))) continue;
    throw ConfigError(std::string(u.key) + ": not available to an embedded trainer: " + u.reason + "; remove the key");
  }
}

}  // namespace tenax::capi
