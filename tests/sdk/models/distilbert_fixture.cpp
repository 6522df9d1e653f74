#include "sdk/models/distilbert_fixture.h"

#include <torch/optim/adamw.h>

namespace tenax::test {

std::filesystem::path distilbert_tiny_dir(const std::filesystem::path& goldens) { return goldens / "distilbert_tiny"; }

void finetune_distilbert_for_roundtrip(sdk::DistilBertForSequenceClassification& model,
                                       const std::map<std::string, torch::Tensor>& parity) {
  // One thread: intra-op parallel reductions may sum in a thread-count-dependent order, and
  // the saved bytes must not depend on the machine's core count.
  torch::set_num_threads(1);
  torch::manual_seed(20241);
  model.train();
  torch::optim::AdamW optimizer(model.parameters(), torch::optim::AdamWOptions(1e-3).weight_decay(0.01));
  for (int step = 0; step < 3; ++step) {
    optimizer.zero_grad();
    auto out = model.forward(parity.at("input_ids"), parity.at("attention_mask"), parity.at("labels"));
    out.loss.backward();
    optimizer.step();
  }
  model.eval();
}

}  // namespace tenax::test
