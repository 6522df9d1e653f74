// distilbert_roundtrip_tool GOLDENS_DIR OUT_DIR: loads goldens/distilbert_tiny, runs the
// deterministic fine-tune of distilbert_fixture.h, then save_pretrained(OUT_DIR).
// tools/goldens/distilbert_goldens.py runs it and loads OUT_DIR with Python transformers;
// distilbert_roundtrip_test repeats it in C++.
#include <exception>
#include <iostream>

#include "sdk/models/distilbert_fixture.h"
#include "sdk/models/minilm_fixture.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: distilbert_roundtrip_tool GOLDENS_DIR OUT_DIR\n";
    return 2;
  }
  try {
    const std::filesystem::path goldens = argv[1];
    auto model = tenax::sdk::DistilBertForSequenceClassification::from_pretrained(
        tenax::test::distilbert_tiny_dir(goldens));
    tenax::test::finetune_distilbert_for_roundtrip(
        *model, tenax::test::read_goldens(goldens / "distilbert_parity.safetensors"));
    model->save_pretrained(argv[2]);
  } catch (const std::exception& e) {
    std::cerr << "distilbert_roundtrip_tool: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
