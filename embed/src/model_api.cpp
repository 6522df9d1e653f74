// Models: the built-in MLP, a TorchScript file, a BERT directory, or any of them from TOML.
#include <memory>
#include <string>
#include <vector>

#include "embedded_model.h"
#include "error_boundary.h"
#include "handles.h"
#include "live_handles.h"
#include "model_config.h"
#include "tenax/core/error.h"

using tenax::capi::guarded;
using tenax::capi::InvalidArgument;
using tenax::capi::out_argument;

namespace tenax::capi {
namespace {

std::string required_string(const char* value, const char* argument) {
  if (value == nullptr) throw InvalidArgument(std::string(argument) + ": NULL string");
  return value;
}

/// Creates the handle for `model` into `out` (NULL until it succeeds).
void hand_out(tenax_model*& out, std::shared_ptr<EmbeddedModel> model) {
  auto handle = std::make_unique<tenax_model>();
  handle->model = std::move(model);
  remember_handle(handle.get());
  out = handle.release();
}

std::shared_ptr<EmbeddedModel> build(const ModelSpec& spec, const std::string& source) {
  if (spec.type == "mlp") {
    if (spec.widths.empty()) throw ConfigError(source + ": [model] widths is missing (type = \"mlp\")");
    return make_mlp(spec.widths, spec.activation, spec.loss);
  }
  if (spec.type == "torchscript" || spec.type == "bert") {
    if (spec.path.empty()) throw ConfigError(source + ": [model] path is missing (type = \"" + spec.type + "\")");
    return spec.type == "bert" ? load_bert(spec.path, spec.num_labels) : load_torchscript(spec.path, spec.loss);
  }
  throw ConfigError(source + ": [model] type '" + spec.type + "' is not \"mlp\", \"torchscript\" or \"bert\"");
}

}  // namespace
}  // namespace tenax::capi

extern "C" {

tenax_status tenax_model_create_mlp(tenax_model** model, const int64_t* widths, int32_t n_widths,
                                    const char* activation, int32_t loss) {
  return guarded("tenax_model_create_mlp", [&] {
    tenax_model*& out = out_argument(model, "model");
    out = nullptr;
    if (n_widths < 2)
      throw InvalidArgument("n_widths: " + std::to_string(n_widths) + "; an MLP needs at least 2 widths");
    if (widths == nullptr) throw InvalidArgument("widths: NULL");
    const std::string act = tenax::capi::required_string(activation, "activation");
    const tenax_loss checked = tenax::capi::checked_loss(loss, "loss");
    tenax::capi::hand_out(out, tenax::capi::make_mlp({widths, widths + n_widths}, act, checked));
  });
}

tenax_status tenax_model_load_torchscript(tenax_model** model, const char* path, int32_t loss) {
  return guarded("tenax_model_load_torchscript", [&] {
    tenax_model*& out = out_argument(model, "model");
    out = nullptr;
    const std::string file = tenax::capi::required_string(path, "path");
    const tenax_loss checked = tenax::capi::checked_loss(loss, "loss");
    tenax::capi::hand_out(out, tenax::capi::load_torchscript(file, checked));
  });
}

tenax_status tenax_model_load_bert(tenax_model** model, const char* directory, int64_t num_labels) {
  return guarded("tenax_model_load_bert", [&] {
    tenax_model*& out = out_argument(model, "model");
    out = nullptr;
    const std::string dir = tenax::capi::required_string(directory, "directory");
    tenax::capi::hand_out(out, tenax::capi::load_bert(dir, num_labels));
  });
}

tenax_status tenax_model_create_from_config(tenax_model** model, const char* toml_path, const char* const* overrides,
                                            int32_t n_overrides) {
  return guarded("tenax_model_create_from_config", [&] {
    tenax_model*& out = out_argument(model, "model");
    out = nullptr;
    if (n_overrides < 0) throw InvalidArgument("n_overrides: " + std::to_string(n_overrides) + " is negative");
    if (n_overrides > 0 && overrides == nullptr) throw InvalidArgument("overrides: NULL with n_overrides > 0");
    std::vector<std::string> items;
    for (int32_t i = 0; i < n_overrides; ++i) {
      items.push_back(tenax::capi::required_string(overrides[i], ("overrides[" + std::to_string(i) + "]").c_str()));
    }
    const std::string file = toml_path ? toml_path : "";
    const auto spec = tenax::capi::read_model_spec(file, items);
    tenax::capi::hand_out(out, tenax::capi::build(spec, file.empty() ? "overrides" : file));
  });
}

tenax_status tenax_model_free(tenax_model** model) {
  return guarded("tenax_model_free", [&] {
    tenax_model*& handle = out_argument(model, "model");
    if (handle == nullptr) return;
    tenax::capi::live(handle, "model", "tenax_model");
    tenax::capi::forget_handle(handle);
    delete handle;
    handle = nullptr;
  });
}

}  // extern "C"
