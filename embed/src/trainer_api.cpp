// Trainer: configuration, one optimizer step, one prediction.
#include <fstream>
#include <sstream>

#include <torch/torch.h>

#include "arrays.h"
#include "embedded_arguments.h"
#include "error_boundary.h"
#include "handles.h"
#include "live_handles.h"
#include "model_config.h"
#include "step_recovery.h"
#include "tenax/core/error.h"
#include "tenax/sdk/recovered_error.h"
#include "tenax/sdk/training_arguments_io.h"

using tenax::capi::guarded;
using tenax::capi::InvalidArgument;
using tenax::capi::live;
using tenax::capi::out_argument;

namespace tenax::capi {
namespace {

// The arguments, and whether the caller set per_device_train_batch_size (then every step's batch
// must have that many rows per micro-batch).
struct EmbeddedArguments {
  sdk::TrainingArguments args;
  bool batch_size_set = false;
};

EmbeddedArguments read_arguments(const char* toml_path, const char* const* overrides, int32_t n_overrides) {
  if (n_overrides < 0) throw InvalidArgument("n_overrides: " + std::to_string(n_overrides) + " is negative");
  if (n_overrides > 0 && overrides == nullptr) throw InvalidArgument("overrides: NULL with n_overrides > 0");
  sdk::TrainingArguments args;
  // The caller saves, labelled by its solver step (tenax_checkpoint_save): a save by the
  // Trainer's own schedule would carry no solver step (sdk/src/run_plan.cpp refuses one).
  args.save_strategy = "no";
  sdk::ArgumentParser parser(args);
  if (toml_path != nullptr) {
    std::ifstream in(toml_path, std::ios::binary);
    if (!in) throw ConfigError(std::string("config file ") + toml_path + " cannot be read (missing, or no permission)");
    std::stringstream text;
    text << in.rdbuf();
    // One file may describe the model too (tenax_model_create_from_config): its [model] table
    // is not a TrainingArguments field.
    parser.load_toml(without_model_table(text.str()), toml_path);
  }
  for (int32_t i = 0; i < n_overrides; ++i) {
    const std::string where = "overrides[" + std::to_string(i) + "]";
    if (overrides[i] == nullptr) throw InvalidArgument(where + ": NULL string");
    const std::string item = overrides[i];
    if (item.find('=') == std::string::npos || item.front() == '=') {
      throw ConfigError(where + " '" + item + "': not key=value (TrainingArguments' names: learning_rate=1e-3)");
    }
    // The parser speaks command-line flags; its message then says which of the caller's strings.
    try {
      parser.apply_overrides({"--" + item});
    } catch (const ConfigError& e) {
      throw ConfigError(where + " '" + item + "': " + e.what());
    }
  }
  args.validate();
  if (args.save_strategy != sdk::SaveStrategy::kNo) {
    throw ConfigError("save_strategy: '" + args.save_strategy.name() +
                      "': an embedded trainer saves when its caller calls tenax_checkpoint_save(step), labelled with "
                      "the caller's step; remove save_strategy (default \"no\")");
  }
  refuse_unembeddable_arguments(args, parser.set_keys());
  return {args, parser.set_keys().count("per_device_train_batch_size") > 0};
}

/// `batch` cut into `parts` micro-batches along the batch dimension (gradient accumulation:
/// the caller hands one batch per optimizer step whatever gradient_accumulation_steps is); of
/// `rows_per_part` rows each when the caller set per_device_train_batch_size.
std::vector<sdk::Batch> micro_batches(const sdk::Batch& batch, std::int64_t parts,
                                      std::optional<std::int64_t> rows_per_part) {
  if (rows_per_part && batch.size() != *rows_per_part * parts) {
    throw InvalidArgument("input: a batch of " + std::to_string(batch.size()) +
                          " rows, but per_device_train_batch_size " + std::to_string(*rows_per_part) +
                          " x gradient_accumulation_steps " + std::to_string(parts) + " = " +
                          std::to_string(*rows_per_part * parts) +
                          " rows per tenax_train_step; hand that many, or set per_device_train_batch_size to match (it "
                          "is recorded with every checkpoint as the global batch an elastic resume keeps)");
  }
  if (parts == 1) return {batch};
  const std::int64_t rows = batch.size();
  if (rows % parts != 0) {
    throw InvalidArgument("input: a batch of " + std::to_string(rows) + " rows does not split into " +
                          std::to_string(parts) + " micro-batches (gradient_accumulation_steps)");
  }
  std::vector<sdk::Batch> out;
  for (std::int64_t i = 0; i < parts; ++i) {
    out.push_back(
        batch.map([&](const torch::Tensor& tensor) { return tensor.chunk(parts, 0)[static_cast<size_t>(i)]; }));
  }
  return out;
}

}  // namespace

std::optional<std::int64_t> ensure_begun(tenax_trainer& trainer, bool resume) {
  if (trainer.begin_failed) {
    throw NotInitialized(
        "trainer: its tenax_checkpoint_restore (or first step) failed, which leaves it unusable; "
        "free it and create a new one (the checkpoints on disk are untouched)");
  }
  if (trainer.begun) return std::nullopt;
  // A begin() that throws part-way must not run twice: the trainer is marked and refused after.
  trainer.begun = true;
  std::optional<std::int64_t> label;
  try {
    label = trainer.trainer->begin(resume);
  } catch (...) {
    trainer.begin_failed = true;
    throw;
  }
  // A replacement (warm spare or new process in a lost rank's place) healed in begin(): its
  // registered arrays now hold the job's state, which the caller has not seen; whatever it was
  // about to do (restore, or a step on a batch made from its initial state) is not done.
  if (trainer.recovers_steps && trainer.trainer->healed_at_begin()) {
    const std::int64_t step = trainer.trainer->state().global_step;
    throw RecoveredError(
        "this process replaces a lost rank and healed from a live peer, not from disk: every rank "
        "stands at optimizer step " +
            std::to_string(step) + " with the registered arrays of that step's tenax_train_step; go on from there",
        step);
  }
  return label;
}

}  // namespace tenax::capi

extern "C" {

tenax_status tenax_trainer_create(tenax_trainer** trainer, tenax_context* ctx, tenax_model* model,
                                  const char* toml_path, const char* const* overrides, int32_t n_overrides) {
  return guarded("tenax_trainer_create", [&] {
    tenax_trainer*& out = out_argument(trainer, "trainer");
    out = nullptr;
    tenax_context& context = live(ctx, "ctx", "tenax_context");
    tenax_model& m = live(model, "model", "tenax_model");
    auto t = std::make_unique<tenax_trainer>();
    tenax::capi::EmbeddedArguments read = tenax::capi::read_arguments(toml_path, overrides, n_overrides);
    t->args = std::move(read.args);
    t->batch_size_set = read.batch_size_set;
    t->context = &context;
    t->model = m.model;
    t->model->initialize(t->args.seed);
    t->trainer = std::make_unique<tenax::sdk::Trainer>(t->model, t->args, /*train_dataset=*/nullptr, *context.worker);
    t->trainer->set_user_state(t->user_state);
    tenax::capi::remember_handle(t.get());
    ++context.trainers;
    out = t.release();
  });
}

tenax_status tenax_trainer_free(tenax_trainer** trainer) {
  return guarded("tenax_trainer_free", [&] {
    tenax_trainer*& handle = out_argument(trainer, "trainer");
    if (handle == nullptr) return;
    tenax_trainer& t = live(handle, "trainer", "tenax_trainer");
    // The save in flight commits (or its failure is reported) before the trainer goes; the
    // trainer is freed either way, then the failure is returned.
    std::exception_ptr failure;
    if (t.begun && !t.begin_failed) {
      try {
        t.trainer->wait_for_checkpoint();
      } catch (...) {
        failure = std::current_exception();
      }
    }
    --t.context->trainers;
    if (t.context->recovering == handle) t.context->recovering = nullptr;
    tenax::capi::forget_handle(handle);
    delete handle;
    handle = nullptr;
    if (failure) std::rethrow_exception(failure);
  });
}

tenax_status tenax_enable_in_process_recovery(tenax_trainer* trainer) {
  return guarded("tenax_enable_in_process_recovery", [&] {
    tenax_trainer& t = live(trainer, "trainer", "tenax_trainer");
    if (t.begun) {
      throw InvalidArgument(
          "trainer: tenax_enable_in_process_recovery after the first step, save or restore; call "
          "it before them, after registering the state arrays");
    }
    if (t.context->recovering != nullptr && t.context->recovering != &t) {
      throw InvalidArgument(
          "trainer: another trainer of this context already heals in process (the context's "
          "collectives heal through one trainer)");
    }
    t.recovers_steps = true;
    t.context->recovering = &t;
    t.trainer->enable_step_recovery();
  });
}

tenax_status tenax_train_step(tenax_trainer* trainer, const tenax_array* input, const tenax_array* label,
                              double* loss) {
  return guarded("tenax_train_step", [&] {
    tenax_trainer& t = live(trainer, "trainer", "tenax_trainer");
    const torch::Tensor x = tenax::capi::view_of(input, "input");
    const torch::Tensor y = tenax::capi::view_of(label, "label");
    const tenax::sdk::Batch batch = t.model->make_batch(x, y);
    tenax::capi::ensure_begun(t, /*resume=*/false);
    const std::optional<std::int64_t> rows =
        t.batch_size_set ? std::optional<std::int64_t>(t.args.per_device_train_batch_size) : std::nullopt;
    const double value = t.trainer->step(tenax::capi::micro_batches(batch, t.trainer->accumulation_steps(), rows));
    if (loss != nullptr) *loss = value;
  });
}

tenax_status tenax_predict(tenax_trainer* trainer, const tenax_array* input, tenax_array* output) {
  return guarded("tenax_predict", [&] {
    tenax_trainer& t = live(trainer, "trainer", "tenax_trainer");
    const torch::Tensor x = tenax::capi::view_of(input, "input");
    tenax::capi::view_of(output, "output");  // a bad output array is reported before the forward
    const tenax::sdk::ModelOutput out = t.trainer->predict_batch(t.model->make_batch(x, torch::Tensor()));
    tenax::capi::write_into(output, "output", out.logits);
  });
}

tenax_status tenax_optimizer_step(const tenax_trainer* trainer, int64_t* step) {
  return guarded("tenax_optimizer_step", [&] {
    int64_t& out = out_argument(step, "step");
    out = live(trainer, "trainer", "tenax_trainer").trainer->state().global_step;
  });
}

}  // extern "C"
