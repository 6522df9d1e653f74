// Tenax fine-tunes the tiny ViT, save_pretrained writes a Hugging Face directory, Python
// transformers loads it: tools/goldens/vit_goldens.py ran roundtrip_tool vit (the
// same fine-tune as here), loaded its output with transformers (no missing or unexpected key;
// its own save_pretrained of the loaded model wrote byte-identical weights) and recorded the
// file's hash and transformers' logits. Here the fine-tune is repeated and our logits must equal
// transformers' to 1e-4; a different hash (another BLAS rounding differently) is reported, not
// failed, as in bert_roundtrip_test.
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>

#include <unistd.h>

#include "sdk/models/roundtrip_fixture.h"
#include "sdk/models/minilm_fixture.h"
#include "tenax/core/checksum.h"
#include "tenax/core/files.h"
#include "tenax/sdk/models/vit.h"

namespace tenax::sdk {
namespace {
namespace fs = std::filesystem;

TEST(ViTRoundTrip, FineTunedModelSavesWhatTransformersLoadedAndMatchesItsLogits) {
  const fs::path goldens = test::goldens_dir();
  const auto parity = test::read_goldens(goldens / "vit_parity.safetensors");
  const auto roundtrip = test::read_goldens(goldens / "vit_roundtrip.safetensors");
  const auto meta = test::read_golden_metadata(goldens / "vit_roundtrip.safetensors");

  auto model = ViTForImageClassification::from_pretrained(test::vit_tiny_dir(goldens));
  test::finetune_vit_for_roundtrip(*model, parity);
  const fs::path scratch = fs::temp_directory_path() / ("tenax-vit-roundtrip-" + std::to_string(::getpid()));
  fs::remove_all(scratch);
  const fs::path saved = scratch / "finetuned";
  model->save_pretrained(saved);

  const std::string bytes = files::read_all(saved / "model.safetensors");
  if (checksum_hex(xxh3_64(bytes.data(), bytes.size())) != meta.at("model_safetensors_xxh3_64")) {
    std::cout << "note: model.safetensors is not bit-identical to the one transformers loaded (sha256 "
              << meta.at("model_safetensors_sha256") << "): this BLAS rounds differently; logits compared below\n";
  }
  torch::NoGradGuard no_grad;
  const auto logits = model->forward(parity.at("pixel_values")).logits;
  const double diff = (logits - roundtrip.at("logits")).abs().max().item<double>();
  std::cout << "max |diff| of fine-tuned logits vs transformers: " << diff << "\n";
  EXPECT_LE(diff, 1e-4);
  // Not vacuous: the fine-tune moved the logits far beyond the tolerance.
  EXPECT_GT((roundtrip.at("logits") - parity.at("logits")).abs().max().item<double>(), 1e-2);

  auto reloaded = ViTForImageClassification::from_pretrained(saved);
  reloaded->eval();
  EXPECT_TRUE(reloaded->loading_info().missing_keys.empty());
  EXPECT_TRUE(reloaded->loading_info().unexpected_keys.empty());
  EXPECT_TRUE(torch::equal(reloaded->forward(parity.at("pixel_values")).logits, logits));
  std::error_code ec;
  fs::remove_all(scratch, ec);
}

}  // namespace
}  // namespace tenax::sdk
