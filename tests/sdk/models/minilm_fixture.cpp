#include "sdk/models/minilm_fixture.h"

#include <cstdlib>
#include <stdexcept>

#include <torch/optim/adamw.h>
#include <torch/utils.h>

#include "tenax/storage/safetensors.h"
#include "tensor_conversion.h"

namespace tenax::test {
namespace fs = std::filesystem;

fs::path minilm_dir() {
  const char* env = std::getenv("TENAX_ASSETS");
  const fs::path root = env && *env ? fs::path(env) : fs::path(TENAX_SOURCE_DIR) / ".assets";
  const fs::path dir = root / "all-minilm-l6-v2";
  if (!fs::exists(dir / "model.safetensors") || !fs::exists(dir / "config.json")) {
    throw std::runtime_error(dir.string() +
                             " has no all-MiniLM-L6-v2 weights (config.json, model.safetensors): run "
                             "tools/fetch_assets.sh (make test does), or point TENAX_ASSETS at a directory holding "
                             "all-minilm-l6-v2/");
  }
  return dir;
}

fs::path goldens_dir() { return fs::path(TENAX_SOURCE_DIR) / "tests" / "sdk" / "models" / "goldens"; }

namespace {
storage::SafetensorsFile open_goldens(const fs::path& file) {
  auto read = storage::read_safetensors(file);
  if (!read.is_ok()) {
    throw std::runtime_error("cannot read goldens " + file.string() + ": " + read.status().message() +
                             " (regenerate with tools/goldens/model_goldens.py)");
  }
  return std::move(read).value();
}
}  // namespace

std::map<std::string, torch::Tensor> read_goldens(const fs::path& file) {
  const storage::SafetensorsFile golden = open_goldens(file);
  std::map<std::string, torch::Tensor> out;
  for (const auto& entry : golden.tensors()) {
    storage::TensorData data;
    data.dtype = entry.dtype;
    data.shape = entry.shape;
    data.bytes.assign(golden.data(entry), golden.data(entry) + entry.nbytes);
    out[entry.name] = sdk::to_tensor(data);
  }
  return out;
}

std::map<std::string, std::string> read_golden_metadata(const fs::path& file) { return open_goldens(file).metadata(); }

std::shared_ptr<sdk::BertForSequenceClassification> minilm_with_golden_head(const fs::path& assets,
                                                                            const fs::path& goldens) {
  auto model = sdk::BertForSequenceClassification::from_pretrained(
      assets, sdk::BertPretrainedOptions().num_labels(kGoldenNumLabels));
  const auto parity = read_goldens(goldens / "minilm_parity.safetensors");
  torch::NoGradGuard no_grad;
  auto params = model->named_parameters();
  params["classifier.weight"].copy_(parity.at("classifier.weight"));
  params["classifier.bias"].copy_(parity.at("classifier.bias"));
  return model;
}

void finetune_for_roundtrip(sdk::BertForSequenceClassification& model,
                            const std::map<std::string, torch::Tensor>& parity) {
  // One thread: intra-op parallel reductions may sum in a thread-count-dependent order, and
  // the saved bytes must not depend on the machine's core count.
  torch::set_num_threads(1);
  torch::manual_seed(20240);
  model.train();
  torch::optim::AdamW optimizer(model.parameters(), torch::optim::AdamWOptions(1e-3).weight_decay(0.01));
  for (int step = 0; step < 3; ++step) {
    optimizer.zero_grad();
    auto out = model.forward(parity.at("input_ids"), parity.at("attention_mask"), parity.at("token_type_ids"),
                             parity.at("labels"));
    out.loss.backward();
    optimizer.step();
  }
  model.eval();
}

}  // namespace tenax::test
