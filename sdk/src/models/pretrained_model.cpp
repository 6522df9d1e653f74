// PretrainedModel's loading and saving: Hugging Face model directories in and out, following
// transformers' rules for prefixes, missing and unexpected keys, for every family.
#include "tenax/sdk/models/pretrained_model.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include "tenax/core/error.h"
#include "tenax/core/files.h"
#include "tenax/core/logging.h"
#include "tenax/storage/safetensors.h"
#include "tensor_conversion.h"

namespace tenax::sdk {
namespace {

namespace fs = std::filesystem;

constexpr const char* kConfigFile = "config.json";
constexpr const char* kWeightsFile = "model.safetensors";
/// Files of the tokenizer or image processor that save_pretrained carries over from the source
/// directory.
constexpr const char* kCarriedFiles[] = {"vocab.txt", "tokenizer_config.json", "tokenizer.json",
                                         "special_tokens_map.json", "preprocessor_config.json"};

std::string join(const std::vector<std::string>& names) {
  std::string s = "[";
  for (std::size_t i = 0; i < names.size(); ++i) s += (i ? ", '" : "'") + names[i] + "'";
  return s + "]";
}

std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Buffers transformers registers with persistent=False: old checkpoints carry them, newer
// transformers neither loads nor reports them.
bool is_ignored_buffer(const std::string& name, const PretrainedModelInfo& info) {
  return std::any_of(info.ignored_buffers.begin(), info.ignored_buffers.end(), [&](const std::string& suffix) {
    return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  });
}

bool same_shape(const torch::Tensor& param, const storage::SafetensorsEntry& entry) {
  return entry.shape == std::vector<std::int64_t>(param.sizes().begin(), param.sizes().end());
}

void copy_into(torch::Tensor& param, const storage::SafetensorsFile& file, const storage::SafetensorsEntry& entry,
               const std::string& param_name) {
  const std::string where = file.source() + ": tensor '" + entry.name + "'";
  if (entry.dtype != storage::DType::kFloat32 && entry.dtype != storage::DType::kFloat16 &&
      entry.dtype != storage::DType::kBFloat16) {
    throw StorageError(where + " has dtype " + storage::safetensors_dtype_name(entry.dtype) + "; parameter " +
                       param_name + " needs a floating type (F32, F16 or BF16)");
  }
  if (!same_shape(param, entry)) {
    // A ConfigError, not a StorageError: the file reads fine, it is the wrong one for the model
    // asked for (most often a head trained for other labels), which no retry can mend.
    throw ConfigError(where + " has shape " + shape_string(entry.shape) + " but parameter " + param_name +
                      " of the model built from config.json has shape " +
                      shape_string({param.sizes().begin(), param.sizes().end()}) +
                      "; the checkpoint and its config.json do not belong together (a head trained for "
                      "other labels: ignore_mismatched_sizes re-initialises it, as transformers' "
                      "ignore_mismatched_sizes=True does — PretrainedOptions().ignore_mismatched_sizes(true), or "
                      "model.ignore_mismatched_sizes = true in a `tenax train` job)");
  }
  storage::TensorData data;
  data.dtype = entry.dtype;
  data.shape = entry.shape;
  data.bytes.assign(file.data(entry), file.data(entry) + entry.nbytes);
  param.copy_(to_tensor(data));  // converts F16/BF16 to the parameter's float32
}

// Returns what was missing, unexpected and mismatched; `mismatched` gets transformers' log line
// of each mismatched tensor.
LoadingInfo copy_weights(torch::nn::Module& model, const PretrainedModelInfo& model_info, const fs::path& path,
                         bool ignore_mismatched_sizes, std::vector<std::string>& mismatched) {
  auto read = storage::read_safetensors(path);
  if (!read.is_ok()) {
    if (read.status().code() == StatusCode::kNotFound) {
      throw StorageError(path.string() +
                         ": missing (a Hugging Face model directory needs "
                         "model.safetensors; .bin checkpoints are not supported)");
    }
    throw StorageError("cannot load " + path.string() + ": " + read.status().message());
  }
  const storage::SafetensorsFile& file = read.value();

  // transformers: a checkpoint without any "<prefix>." key is a base model's; its keys then name
  // parameters under <prefix>.
  const std::string base_prefix = model_info.base_model_prefix + ".";
  const bool has_prefix = std::any_of(file.tensors().begin(), file.tensors().end(),
                                      [&](const auto& e) { return e.name.rfind(base_prefix, 0) == 0; });

  torch::NoGradGuard no_grad;
  auto params = model.named_parameters(/*recurse=*/true);
  std::set<std::string> loaded;
  LoadingInfo info;
  for (const storage::SafetensorsEntry& entry : file.tensors()) {
    const std::string name = has_prefix ? entry.name : base_prefix + entry.name;
    if (torch::Tensor* param = params.find(name)) {
      if (ignore_mismatched_sizes && !same_shape(*param, entry)) {
        info.mismatched_keys.push_back(name);
        mismatched.push_back("- " + name + ": found shape " + shape_string(entry.shape) + " in the checkpoint and " +
                             shape_string({param->sizes().begin(), param->sizes().end()}) +
                             " in the model instantiated");
      } else {
        copy_into(*param, file, entry, name);
      }
      loaded.insert(name);
    } else if (!is_ignored_buffer(entry.name, model_info)) {
      info.unexpected_keys.push_back(entry.name);
    }
  }
  for (const auto& item : params) {
    if (!loaded.count(item.key())) info.missing_keys.push_back(item.key());
  }
  return info;
}

void log_loading_info(const LoadingInfo& info, const std::vector<std::string>& mismatched,
                      const std::string& architecture, const fs::path& dir) {
  auto log = logger("tenax.sdk");
  if (!info.unexpected_keys.empty()) {
    log->warn("Some weights of the model checkpoint at {} were not used when initializing {}: {}", dir.string(),
              architecture, join(info.unexpected_keys));
  }
  if (!info.missing_keys.empty()) {
    log->warn(
        "Some weights of {} were not initialized from the model checkpoint at {} and are newly initialized: "
        "{}\nYou should probably TRAIN this model on a down-stream task to be able to use it for predictions "
        "and inference.",
        architecture, dir.string(), join(info.missing_keys));
  }
  if (!mismatched.empty()) {
    std::string lines;
    for (const auto& line : mismatched) lines += (lines.empty() ? "" : "\n") + line;
    log->warn(
        "Some weights of {} were not initialized from the model checkpoint at {} and are newly initialized "
        "because the shapes did not match:\n{}\nYou should probably TRAIN this model on a down-stream task to be "
        "able to use it for predictions and inference.",
        architecture, dir.string(), lines);
  }
}

// save_pretrained replaces the whole directory, so it must not hold anything else.
void check_replaceable(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(dir, ec))) return;
  if (!fs::is_directory(fs::symlink_status(dir, ec))) {
    throw ConfigError("save_pretrained: " + dir.string() + " exists and is not a directory");
  }
  std::set<std::string> allowed = {kConfigFile, kWeightsFile};
  for (const char* f : kCarriedFiles) allowed.insert(f);
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (!allowed.count(name) || !entry.is_regular_file()) {
      throw ConfigError("save_pretrained: " + dir.string() + " holds '" + name +
                        "', which is not a model file; save_pretrained replaces the directory "
                        "whole, so save into a new or model-only directory");
    }
  }
}

// Puts the finished `tmp` directory in place of `dir`: one rename when `dir` is absent, an
// atomic exchange otherwise (the old contents then sit in `tmp` and are removed).
void install_directory(const fs::path& tmp, const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(dir, ec))) {
    files::durable_rename(tmp, dir);
    return;
  }
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE) != 0) {
    const int err = errno;
    fs::remove_all(tmp, ec);
    throw StorageError("save_pretrained: cannot swap " + tmp.string() + " into " + dir.string() + ": " +
                       std::strerror(err) + "; " + dir.string() + " is unchanged");
  }
  files::fsync_dir(dir.has_parent_path() ? dir.parent_path() : fs::path("."));
  fs::remove_all(tmp, ec);  // the previous model; a leftover is harmless (hidden name)
}

}  // namespace

void PretrainedModel::apply_options(PretrainedConfig& config, const PretrainedOptions& options, const fs::path& dir) {
  if (options.id2label()) {
    if (options.num_labels() && *options.num_labels() != static_cast<std::int64_t>(options.id2label()->size())) {
      throw ConfigError("from_pretrained(" + dir.string() + "): num_labels " + std::to_string(*options.num_labels()) +
                        " disagrees with id2label's " + std::to_string(options.id2label()->size()) + " labels");
    }
    config.id2label = *options.id2label();
  } else if (options.num_labels()) {
    config.set_num_labels(*options.num_labels());
  }
  if (options.problem_type()) config.problem_type = *options.problem_type();
}

void PretrainedModel::load_weights(const fs::path& dir, bool ignore_mismatched_sizes) {
  std::vector<std::string> mismatched;
  loading_info_ = copy_weights(*this, info(), dir / kWeightsFile, ignore_mismatched_sizes, mismatched);
  pretrained_dir_ = dir;
  log_loading_info(loading_info_, mismatched, info().architecture, dir);
}

void PretrainedModel::save_pretrained(const fs::path& dir_in) const {
  fs::path dir = fs::absolute(dir_in).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();  // "out/" names the directory "out"
  check_replaceable(dir);
  const fs::path parent = dir.parent_path();
  fs::create_directories(parent);
  const fs::path tmp = parent / ("." + dir.filename().string() + ".tmp-" + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove_all(tmp, ec);
  if (!fs::create_directory(tmp, ec)) {
    throw StorageError("save_pretrained: cannot create " + tmp.string() + ": " + ec.message());
  }
  try {
    std::vector<torch::Tensor> keep_alive;
    std::vector<storage::TensorRef> refs;
    for (const auto& item : named_parameters(/*recurse=*/true)) {
      keep_alive.push_back(contiguous_cpu(item.value()));
      refs.push_back(make_ref(item.key(), keep_alive.back()));
    }
    Status written = storage::write_safetensors(tmp / kWeightsFile, refs, {{"format", "pt"}});
    if (!written.is_ok()) throw StorageError("save_pretrained: " + written.message());

    const std::string config_text = config_json();
    files::write_durably(tmp / kConfigFile, config_text.data(), config_text.size());
    if (!pretrained_dir_.empty()) {
      for (const char* name : kCarriedFiles) {
        if (!fs::exists(pretrained_dir_ / name)) continue;
        const std::string bytes = files::read_all(pretrained_dir_ / name);
        files::write_durably(tmp / name, bytes.data(), bytes.size());
      }
    }
    files::fsync_dir(tmp);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  install_directory(tmp, dir);
}

}  // namespace tenax::sdk
