// Shared by the BERT model tests and bert_roundtrip_tool: where the all-MiniLM-L6-v2 weights
// and the committed goldens are, the golden inputs, and the deterministic fine-tune whose saved
// model Python transformers loaded when tools/goldens/model_goldens.py ran.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include <torch/types.h>

#include "tenax/sdk/models/bert.h"

namespace tenax::test {

/// $TENAX_ASSETS/all-minilm-l6-v2, else <source>/.assets/all-minilm-l6-v2. Throws
/// std::runtime_error naming tools/fetch_assets.sh when its model.safetensors is missing:
/// these tests need the real weights and fail (never skip) without them.
std::filesystem::path minilm_dir();

/// tests/sdk/models/goldens in the source tree.
std::filesystem::path goldens_dir();

/// Every tensor of a golden safetensors file by name (throws naming the file when unreadable).
std::map<std::string, torch::Tensor> read_goldens(const std::filesystem::path& file);

/// Its "__metadata__" map.
std::map<std::string, std::string> read_golden_metadata(const std::filesystem::path& file);

/// Number of labels of the golden classification head.
inline constexpr std::int64_t kGoldenNumLabels = 3;

/// MiniLM from `assets` with a 3-label head whose weights are the ones transformers
/// initialised in the goldens (classifier.weight/bias of minilm_parity.safetensors).
std::shared_ptr<sdk::BertForSequenceClassification> minilm_with_golden_head(const std::filesystem::path& assets,
                                                                            const std::filesystem::path& goldens);

/// Three AdamW steps (lr 1e-3, weight decay 0.01) in training mode (dropout on, seed 20240),
/// one thread, on the golden batch with its labels; leaves the model in eval mode.
void finetune_for_roundtrip(sdk::BertForSequenceClassification& model,
                            const std::map<std::string, torch::Tensor>& parity);

}  // namespace tenax::test
