// Activation checkpointing (transformers' gradient_checkpointing, torch.utils.checkpoint with
// use_reentrant=True): a layer run through checkpoint_activations keeps only its inputs for
// backward; backward runs the layer again, under the autocast state and from the random state
// (dropout) of the first run, and back-propagates through that second run. The gradients are
// those of the plain layer; the memory its activations took is freed after the forward, for the
// price of one more forward per layer.
//
// BERT, DistilBERT and ViT call it per encoder layer when Model::set_gradient_checkpointing(true)
// (TrainingArguments::gradient_checkpointing does so); a model of one's own can call it around
// any block whose output is one tensor.
//
//   hidden = tenax::sdk::checkpoint_activations(
//       [&](const std::vector<torch::Tensor>& in) { return layer->forward(in[0], in[1]); }, {hidden, mask});
//
// Thread-safety: as the layer's forward (the training thread); backward calls `layer` again, so
// it must still be callable then (capture modules by shared_ptr or by reference to a member).
#pragma once

#include <functional>
#include <vector>

#include <torch/types.h>

namespace tenax::sdk {

using CheckpointedLayer = std::function<torch::Tensor(const std::vector<torch::Tensor>&)>;

/// layer(inputs), without the activations when autograd records (GradMode on and an input that
/// requires grad); otherwise a plain call. Undefined inputs are passed through as they are.
torch::Tensor checkpoint_activations(CheckpointedLayer layer, const std::vector<torch::Tensor>& inputs);

}  // namespace tenax::sdk
