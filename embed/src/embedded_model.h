// The models the C API trains: a tenax::sdk::Model (what the Trainer drives) that also knows
// how the caller's raw arrays become its Batch, and how its parameters start from a seed.
//
// Three kinds: a built-in MLP, a TorchScript module (torch::jit), a Hugging Face BERT
// directory. Loss (MSE or cross-entropy) is computed in forward(Batch) when the batch has
// labels, as the Trainer expects of a Model.
// Thread-safety: as torch::nn::Module (the training thread).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "tenax.h"
#include "tenax/sdk/data.h"
#include "tenax/sdk/model.h"

namespace tenax::capi {

class EmbeddedModel : public sdk::Model {
 public:
  /// The Trainer's batch for the caller's `input` and `label` (C-order views of its memory;
  /// `label` undefined for a prediction). InvalidArgument naming "input" or "label" when the
  /// dtype or shape does not fit this model.
  virtual sdk::Batch make_batch(const torch::Tensor& input, const torch::Tensor& label) const = 0;
  /// Draws the initial parameters from `seed` (the trainer's), so that two runs with one seed
  /// start alike. Default: the model keeps what it has (a TorchScript file's or BERT's weights).
  virtual void initialize(std::uint64_t /*seed*/) {}
};

/// Linear layers widths[0] -> ... -> widths.back() with `activation` ("relu", "tanh", "gelu")
/// between them. InvalidArgument naming "widths" / "activation" / "loss".
std::shared_ptr<EmbeddedModel> make_mlp(const std::vector<std::int64_t>& widths, const std::string& activation,
                                        tenax_loss loss);
/// A module saved by torch.jit.script(m).save(path). StorageError naming `path` when it is
/// missing, unreadable or has no forward method.
std::shared_ptr<EmbeddedModel> load_torchscript(const std::filesystem::path& path, tenax_loss loss);
/// BertForSequenceClassification from a Hugging Face directory, `num_labels` classes.
std::shared_ptr<EmbeddedModel> load_bert(const std::filesystem::path& directory, std::int64_t num_labels);

/// `loss` checked: InvalidArgument naming `argument` unless it is a tenax_loss.
tenax_loss checked_loss(int64_t loss, const char* argument);
/// The loss of `logits` against `labels` (InvalidArgument naming "label" when they do not fit).
torch::Tensor loss_of(tenax_loss loss, const torch::Tensor& logits, const torch::Tensor& labels);
/// Float input (+ float label for MSE, int64 {batch} for cross-entropy) as a Batch: the checks
/// every float model shares; `features` (of input dim 1), when >= 0, is checked too.
sdk::Batch float_batch(const torch::Tensor& input, const torch::Tensor& label, tenax_loss loss, std::int64_t features);

}  // namespace tenax::capi
