// Shared by the DistilBERT and ViT tests and roundtrip_tool: where the transformers-made tiny
// models are, and the deterministic fine-tunes whose saved models Python transformers loaded
// when tools/goldens/distilbert_goldens.py and vit_goldens.py ran.
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include <torch/types.h>

#include "tenax/sdk/models/distilbert.h"
#include "tenax/sdk/models/vit.h"

namespace tenax::test {

/// tests/sdk/models/goldens/distilbert_tiny: the model directory transformers saved.
std::filesystem::path distilbert_tiny_dir(const std::filesystem::path& goldens);
/// tests/sdk/models/goldens/vit_tiny.
std::filesystem::path vit_tiny_dir(const std::filesystem::path& goldens);

/// Three AdamW steps (lr 1e-3, weight decay 0.01) in training mode (dropout on, seed 20241),
/// one thread, on the golden batch with its labels; leaves the model in eval mode.
void finetune_distilbert_for_roundtrip(sdk::DistilBertForSequenceClassification& model,
                                       const std::map<std::string, torch::Tensor>& parity);
/// The same for ViT on the golden pixel_values and labels (seed 20242).
void finetune_vit_for_roundtrip(sdk::ViTForImageClassification& model,
                                const std::map<std::string, torch::Tensor>& parity);

}  // namespace tenax::test
