// The [model] table of a TOML file: which model tenax_model_create_from_config builds.
//
//   [model]
//   type = "mlp"              # "mlp", "torchscript" or "bert"
//   widths = [2, 64, 64, 1]   # mlp
//   activation = "tanh"       # mlp: relu, tanh, gelu
//   loss = "mse"              # mlp, torchscript: "mse" or "cross_entropy"
//   path = "net.pt"           # torchscript: the file; bert: the directory (relative: to the cwd)
//   num_labels = 3            # bert
//
// The table may sit in the trainer's TOML file beside the TrainingArguments (the trainer skips
// it: without_model_table). Overrides are "key=value" ("widths=2,32,1", "type=torchscript").
// Thread-safety: stateless.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tenax.h"

namespace tenax::capi {

struct ModelSpec {
  std::string type;
  std::vector<std::int64_t> widths;
  std::string activation = "tanh";
  tenax_loss loss = TENAX_LOSS_MSE;
  std::string path;
  std::int64_t num_labels = 2;
};

/// The [model] table of `file` (absent: `spec` as given), then `overrides`. ConfigError naming the
/// key (and file and line) for an unknown key, a wrong type or a missing type.
ModelSpec read_model_spec(const std::filesystem::path& file, const std::vector<std::string>& overrides);

/// `text` with the lines of its [model] table blanked (not removed: the TrainingArguments
/// parser's messages keep their line numbers).
std::string without_model_table(const std::string& text);

}  // namespace tenax::capi
