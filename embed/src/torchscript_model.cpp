// A TorchScript module trained through libtorch's torch::jit.
//
// The Trainer, its optimizer and its checkpoints see a torch::nn::Module's named_parameters(),
// and a jit::Module is not one. So the adapter registers the jit module's floating-point
// parameter tensors (the same tensors, not copies: the optimizer's in-place updates are what
// the script computes with) in a tree of plain nn::Modules mirroring the script's submodules,
// because nn::Module refuses '.' in a parameter name: "fc1.weight" becomes parameter "weight"
// of child "fc1", and named_parameters() again gives "fc1.weight", PyTorch's state-dict name.
#include <torch/script.h>
#include <torch/torch.h>

#include "arrays.h"
#include "embedded_model.h"
#include "error_boundary.h"
#include "tenax/core/error.h"

namespace tenax::capi {
namespace {

std::string first_line(const std::string& message) { return message.substr(0, message.find('\n')); }

// The TorchScript interpreter's message is a traceback ending in "RuntimeError: <what>": the
// what is the line a caller can act on.
std::string script_error(const std::string& message) {
  const auto at = message.rfind("RuntimeError: ");
  return at == std::string::npos ? first_line(message) : first_line(message.substr(at + 14));
}

class TorchScriptModel : public EmbeddedModel {
 public:
  TorchScriptModel(torch::jit::Module module, std::filesystem::path path, tenax_loss loss)
      : module_(std::move(module)), path_(std::move(path)), loss_(loss) {
    for (const auto& parameter : module_.named_parameters(/*recurse=*/true)) {
      if (parameter.value.is_floating_point()) register_at_path(parameter.name, parameter.value);
    }
  }

  sdk::ModelOutput forward(const sdk::Batch& batch) override {
    torch::IValue result;
    try {
      result = module_.forward({batch.inputs});
    } catch (const std::exception& e) {
      // The script's own shape checks (a matmul of the wrong width) are the caller's input not
      // fitting this file: say so in the caller's terms rather than as an internal error.
      throw InvalidArgument("input: the TorchScript module " + path_.string() + " rejected an input of shape " +
                            shape_string(batch.inputs.sizes()) + ": " + script_error(e.what()));
    }
    if (!result.isTensor()) {
      throw StorageError(path_.string() + ": forward returned a " + result.tagKind() +
                         ", not a Tensor; Tenax trains a forward(input) -> Tensor");
    }
    sdk::ModelOutput out;
    out.logits = result.toTensor();
    if (batch.labels.defined()) out.loss = loss_of(loss_, out.logits, batch.labels);
    return out;
  }

  sdk::Batch make_batch(const torch::Tensor& input, const torch::Tensor& label) const override {
    return float_batch(input, label, loss_, /*features=*/-1);  // the script checks its own shapes
  }

  // Dropout and batch norm inside the script follow the Trainer's train()/eval() switches.
  void train(bool on) override {
    torch::nn::Module::train(on);
    module_.train(on);
  }

 private:
  void register_at_path(const std::string& dotted, const torch::Tensor& tensor) {
    torch::nn::Module* parent = this;
    size_t begin = 0;
    for (size_t dot = dotted.find('.'); dot != std::string::npos; dot = dotted.find('.', begin)) {
      const std::string child = dotted.substr(begin, dot - begin);
      const auto children = parent->named_children();
      const auto* found = children.find(child);
      parent = found ? found->get() : parent->register_module(child, std::make_shared<torch::nn::Module>()).get();
      begin = dot + 1;
    }
    parent->register_parameter(dotted.substr(begin), tensor, /*requires_grad=*/true);
  }

  torch::jit::Module module_;
  std::filesystem::path path_;
  tenax_loss loss_;
};

}  // namespace

std::shared_ptr<EmbeddedModel> load_torchscript(const std::filesystem::path& path, tenax_loss loss) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw StorageError("TorchScript file " + path.string() +
                       " does not exist (or is not a file); save one with torch.jit.script(model).save(path)");
  }
  torch::jit::Module module;
  try {
    module = torch::jit::load(path.string());
  } catch (const c10::Error& e) {
    throw StorageError(path.string() + " is not a TorchScript module that torch::jit::load can read (" +
                       first_line(e.what_without_backtrace()) + "); save it with torch.jit.script(model).save(path)");
  }
  const auto forward = module.find_method("forward");
  if (!forward) {
    throw StorageError(path.string() + ": the TorchScript module has no forward method; Tenax calls forward(input)");
  }
  const size_t arguments = forward->function().getSchema().arguments().size();  // self included
  if (arguments != 2) {
    throw StorageError(path.string() + ": forward takes " + std::to_string(arguments - 1) +
                       " arguments besides self; Tenax calls forward(input) with one tensor");
  }
  auto model = std::make_shared<TorchScriptModel>(std::move(module), path, loss);
  if (model->parameters().empty()) {
    throw StorageError(path.string() + ": the TorchScript module has no floating-point parameters to train");
  }
  return model;
}

}  // namespace tenax::capi
