// bert_roundtrip_tool ASSETS_DIR GOLDENS_DIR OUT_DIR: the deterministic fine-tune of
// minilm_fixture.h, then save_pretrained(OUT_DIR). tools/goldens/model_goldens.py runs it and
// loads OUT_DIR with Python transformers; bert_roundtrip_test repeats it in C++.
#include <exception>
#include <iostream>

#include "sdk/models/minilm_fixture.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: bert_roundtrip_tool ASSETS_DIR GOLDENS_DIR OUT_DIR\n";
    return 2;
  }
  try {
    auto model = tenax::test::minilm_with_golden_head(argv[1], argv[2]);
    tenax::test::finetune_for_roundtrip(
        *model, tenax::test::read_goldens(std::filesystem::path(argv[2]) / "minilm_parity.safetensors"));
    model->save_pretrained(argv[3]);
  } catch (const std::exception& e) {
    std::cerr << "bert_roundtrip_tool: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
