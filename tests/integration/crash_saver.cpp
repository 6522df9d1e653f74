// A victim for save_crash_test: two ranks (threads over one in-memory store) that first load
// the newest committed checkpoint — checking that every tensor holds the value of the step it
// claims, so a half-written checkpoint that loads would be caught — then save checkpoint after
// checkpoint (save_total_limit 3, so retention runs too) until killed.
//
//   crash_saver OUTPUT_DIR GENERATION [COUNT]
// Prints "loaded <step>" (or "loaded none"), "ready", then "saved <step>" per commit; exits
// after COUNT saves (default: never). Exit 3: an inconsistent checkpoint was loaded.
#include <atomic>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include "tenax/elastic/in_memory_store.h"
#include "tenax/sdk/checkpointer.h"

namespace {

constexpr int kWorld = 2;
constexpr std::int64_t kFloats = 1 << 20;  // 4 MiB per tensor, 4 tensors: each save ~16 MiB

tenax::sdk::NamedTensors state_of(std::int64_t step) {
  tenax::sdk::NamedTensors out;
  for (int i = 0; i < 4; ++i) {
    out.emplace_back("model/w" + std::to_string(i), torch::full({kFloats}, static_cast<float>(step * 10 + i)));
  }
  out.emplace_back("sampler", torch::tensor({step}, torch::kInt64));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: crash_saver OUTPUT_DIR GENERATION [COUNT]\n";
    return 2;
  }
  const std::filesystem::path out = argv[1];
  const std::int64_t generation = std::atoll(argv[2]);
  const std::int64_t count = argc > 3 ? std::atoll(argv[3]) : -1;
  torch::set_num_threads(1);

  tenax::elastic::InMemoryStore shared;
  const std::string prefix = tenax::elastic::generation_prefix(generation);
  tenax::sdk::CheckpointerOptions options;
  options.save_total_limit = 3;
  std::vector<std::unique_ptr<tenax::sdk::Checkpointer>> ranks;
  for (int r = 0; r < kWorld; ++r) {
    ranks.push_back(std::make_unique<tenax::sdk::Checkpointer>(
        out, r, kWorld, generation, std::make_unique<tenax::elastic::PrefixStore>(prefix, shared), options));
  }

  std::int64_t step = 0;
  auto loaded = ranks[0]->load_latest([](const std::string&) { return true; });
  if (loaded) {
    step = loaded->step;
    const auto expected = state_of(step);
    for (const auto& [name, t] : expected) {
      if (!torch::equal(loaded->get(name), t)) {
        std::cout << "INCONSISTENT " << loaded->dir.string() << " tensor " << name << std::endl;
        return 3;
      }
    }
    std::cout << "loaded " << step << std::endl;
  } else {
    std::cout << "loaded none" << std::endl;
  }
  std::cout << "ready" << std::endl;

  for (std::int64_t n = 0; count < 0 || n < count; ++n) {
    ++step;
    const auto state = state_of(step);
    std::vector<std::thread> threads;
    std::atomic<bool> ok{true};
    for (int r = 0; r < kWorld; ++r) {
      threads.emplace_back([&, r] {
        tenax::sdk::SaveRequest request;
        request.step = step;
        request.replicated = state;
        request.per_rank = {{"rng/rank" + std::to_string(r) + "/cpu", torch::full({16}, r, torch::kUInt8)}};
        try {
          ranks[static_cast<std::size_t>(r)]->save(std::move(request));
        } catch (const std::exception& e) {
          std::cerr << "rank " << r << ": " << e.what() << "\n";
          ok = false;
        }
      });
    }
    for (auto& t : threads) t.join();
    if (!ok) return 1;
    std::cout << "saved " << step << std::endl;
  }
  return 0;
}
