// roundtrip_tool distilbert|vit GOLDENS_DIR OUT_DIR: loads goldens/<family>_tiny, runs the
// deterministic fine-tune of roundtrip_fixture.h, then save_pretrained(OUT_DIR).
// tools/goldens/distilbert_goldens.py and vit_goldens.py run it and load OUT_DIR with Python
// transformers; the *_roundtrip tests repeat it in C++.
#include <exception>
#include <iostream>
#include <string>

#include "sdk/models/minilm_fixture.h"
#include "sdk/models/roundtrip_fixture.h"

int main(int argc, char** argv) {
  const std::string family = argc == 4 ? argv[1] : "";
  if (family != "distilbert" && family != "vit") {
    std::cerr << "usage: roundtrip_tool distilbert|vit GOLDENS_DIR OUT_DIR\n";
    return 2;
  }
  try {
    const std::filesystem::path goldens = argv[2];
    const auto parity = tenax::test::read_goldens(goldens / (family + "_parity.safetensors"));
    if (family == "distilbert") {
      auto model =
          tenax::sdk::DistilBertForSequenceClassification::from_pretrained(tenax::test::distilbert_tiny_dir(goldens));
      tenax::test::finetune_distilbert_for_roundtrip(*model, parity);
      model->save_pretrained(argv[3]);
    } else {
      auto model = tenax::sdk::ViTForImageClassification::from_pretrained(tenax::test::vit_tiny_dir(goldens));
      tenax::test::finetune_vit_for_roundtrip(*model, parity);
      model->save_pretrained(argv[3]);
    }
  } catch (const std::exception& e) {
    std::cerr << "roundtrip_tool: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
