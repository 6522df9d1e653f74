#include "sdk/models/roundtrip_fixture.h"

#include <functional>

#include <torch/optim/adamw.h>

namespace tenax::test {
namespace {

void finetune(sdk::Model& model, std::uint64_t seed, const std::function<torch::Tensor()>& loss) {
  // One thread: intra-op parallel reductions may sum in a thread-count-dependent order, and
  // the saved bytes must not depend on the machine's core count.
  torch::set_num_threads(1);
  torch::manual_seed(seed);
  model.train();
  torch::optim::AdamW optimizer(model.parameters(), torch::optim::AdamWOptions(1e-3).weight_decay(0.01));
  for (int step = 0; step < 3; ++step) {
    optimizer.zero_grad();
    loss().backward();
    optimizer.step();
  }
  model.eval();
}

}  // namespace

std::filesystem::path distilbert_tiny_dir(const std::filesystem::path& goldens) { return goldens / "distilbert_tiny"; }
std::filesystem::path vit_tiny_dir(const std::filesystem::path& goldens) { return goldens / "vit_tiny"; }

void finetune_distilbert_for_roundtrip(sdk::DistilBertForSequenceClassification& model,
                                       const std::map<std::string, torch::Tensor>& parity) {
  finetune(model, 20241, [&] {
    return model.forward(parity.at("input_ids"), parity.at("attention_mask"), parity.at("labels")).loss;
  });
}

void finetune_vit_for_roundtrip(sdk::ViTForImageClassification& model,
                                const std::map<std::string, torch::Tensor>& parity) {
  finetune(model, 20242, [&] { return model.forward(parity.at("pixel_values"), parity.at("labels")).loss; });
}

}  // namespace tenax::test
