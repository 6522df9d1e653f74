// A C++ program outside the Tenax tree, in a project without the C language, built against an
// installed Tenax: links the SDK (and so HDF5 through tenax::storage).
#include <iostream>

#include <tenax/sdk/sampler.h>
#include <tenax/sdk/training_arguments.h>

int main(int argc, char** argv) {
  tenax::sdk::TrainingArguments args;
  args.output_dir = argc > 1 ? argv[1] : "/tmp/consumer";
  args.validate();
  tenax::sdk::ResumableSampler sampler(64, 8, args.seed);
  if (sampler.rank_indices(3, 1, 2).size() != 4) return 1;
  std::cout << "c++-only consumer ok\n";
  return 0;
}
