// A program outside the Tenax tree, built against an installed Tenax. The umbrella header
// first: it compiles from the installed headers alone (none of them needs one that is not).
#include <tenax/sdk.h>

#include <iostream>

#include <tenax/sdk/sampler.h>
#include <tenax/sdk/training_arguments.h>

int main() {
  tenax::sdk::TrainingArguments args;
  args.output_dir = "/tmp/consumer";
  args.validate();
  tenax::sdk::ResumableSampler sampler(64, 8, args.seed);
  if (sampler.rank_indices(3, 1, 2).size() != 4) return 1;
  std::cout << "consumer ok\n";
  return 0;
}
