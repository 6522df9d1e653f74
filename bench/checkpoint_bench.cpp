// Checkpoint throughput, async stall and reshard load of a BERT-base-sized training state
// (110 M float32 parameters + AdamW exp_avg and exp_avg_sq: about 1.3 GB). Run by
// bench/checkpoint_bench.sh, which measures `dd` on the same disk in the same invocation and
// prints the ratios; this program prints one "name seconds bytes" line per measurement.
//
//   checkpoint_bench DIR [--reshard-writers N]
//
// Cold reads drop the page cache first (echo 3 > /proc/sys/vm/drop_caches, root only); the
// output says whether that worked.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include "tenax/elastic/in_memory_store.h"
#include "tenax/sdk/checkpointer.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using tenax::sdk::NamedTensors;

namespace {

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

bool drop_caches() {
  ::sync();
  std::ofstream f("/proc/sys/vm/drop_caches");
  f << "3\n";
  f.flush();
  return static_cast<bool>(f);
}

// BERT-base's parameter shapes (embeddings, 12 encoder layers, pooler), HF names.
NamedTensors bert_base_state() {
  NamedTensors params;
  auto add = [&](const std::string& name, std::vector<std::int64_t> shape) {
    params.emplace_back(name, torch::randn(shape));
  };
  add("bert.embeddings.word_embeddings.weight", {30522, 768});
  add("bert.embeddings.position_embeddings.weight", {512, 768});
  add("bert.embeddings.token_type_embeddings.weight", {2, 768});
  add("bert.embeddings.LayerNorm.weight", {768});
  add("bert.embeddings.LayerNorm.bias", {768});
  for (int l = 0; l < 12; ++l) {
    const std::string p = "bert.encoder.layer." + std::to_string(l) + ".";
    for (const char* m : {"attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"}) {
      add(p + m + ".weight", {768, 768});
      add(p + m + ".bias", {768});
    }
    add(p + "attention.output.LayerNorm.weight", {768});
    add(p + "attention.output.LayerNorm.bias", {768});
    add(p + "intermediate.dense.weight", {3072, 768});
    add(p + "intermediate.dense.bias", {3072});
    add(p + "output.dense.weight", {768, 3072});
    add(p + "output.dense.bias", {768});
    add(p + "output.LayerNorm.weight", {768});
    add(p + "output.LayerNorm.bias", {768});
  }
  add("bert.pooler.dense.weight", {768, 768});
  add("bert.pooler.dense.bias", {768});
  NamedTensors state;
  for (const auto& [name, t] : params) state.emplace_back("model/" + name, t);
  for (const auto& [name, t] : params) {
    state.emplace_back("optim/" + name + "/exp_avg", torch::randn_like(t));
    state.emplace_back("optim/" + name + "/exp_avg_sq", torch::rand_like(t));
    state.emplace_back("optim/" + name + "/step", torch::tensor(std::int64_t{1000}));
  }
  return state;
}

std::uint64_t bytes_of(const NamedTensors& state) {
  std::uint64_t n = 0;
  for (const auto& [name, t] : state) n += static_cast<std::uint64_t>(t.numel()) * t.element_size();
  return n;
}

std::uint64_t dir_bytes(const fs::path& dir) {
  std::uint64_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) n += e.file_size();
  }
  return n;
}

tenax::sdk::SaveRequest request(const NamedTensors& state, int rank) {
  tenax::sdk::SaveRequest r;
  r.step = 100;
  r.replicated = state;
  r.per_rank = {{"rng/rank" + std::to_string(rank) + "/cpu", torch::ones({5056}, torch::kUInt8)}};
  return r;
}

// Saves `state` with `world` ranks as threads (one store) into `out`; returns the seconds.
double save_with_ranks(const fs::path& out, const NamedTensors& state, int world) {
  tenax::elastic::InMemoryStore shared;
  std::vector<std::unique_ptr<tenax::sdk::Checkpointer>> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.push_back(std::make_unique<tenax::sdk::Checkpointer>(
        out, r, world, 0, std::make_unique<tenax::elastic::PrefixStore>("gen/0/", shared)));
  }
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] { ranks[static_cast<std::size_t>(r)]->save(request(state, r)); });
  }
  for (auto& t : threads) t.join();
  return since(start);
}

double load_all(const fs::path& out, std::uint64_t expect_bytes) {
  tenax::sdk::Checkpointer reader(out, 0, 1, 0, std::make_unique<tenax::elastic::InMemoryStore>());
  const auto start = Clock::now();
  auto loaded = reader.load_latest([](const std::string& n) { return n.rfind("model/", 0) == 0 || n.rfind("optim/", 0) == 0; });
  const double seconds = since(start);
  std::uint64_t got = 0;
  if (loaded) {
    for (const auto& [name, t] : loaded->tensors) got += static_cast<std::uint64_t>(t.numel()) * t.element_size();
  }
  if (got != expect_bytes) {
    std::fprintf(stderr, "load of %s returned %llu bytes, expected %llu\n", out.c_str(),
                 static_cast<unsigned long long>(got), static_cast<unsigned long long>(expect_bytes));
    std::exit(1);
  }
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: checkpoint_bench DIR [--reshard-writers N]\n");
    return 2;
  }
  const fs::path dir = argv[1];
  int reshard_writers = 4;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--reshard-writers") reshard_writers = std::atoi(argv[i + 1]);
  }
  torch::manual_seed(0);
  const NamedTensors state = bert_base_state();
  const std::uint64_t tensor_bytes = bytes_of(state);
  std::printf("state %llu bytes in %zu tensors\n", static_cast<unsigned long long>(tensor_bytes), state.size());

  // 1. Synchronous save, one rank: the whole write + fsync + commit.
  fs::remove_all(dir / "sync");
  const double sync_s = save_with_ranks(dir / "sync", state, 1);
  std::printf("save_sync %.4f %llu\n", sync_s, static_cast<unsigned long long>(dir_bytes(dir / "sync")));

  // 2. Async save, one rank: the training thread's stall is save_async()'s duration.
  fs::remove_all(dir / "async");
  {
    tenax::sdk::Checkpointer ckpt(dir / "async", 0, 1, 0, std::make_unique<tenax::elastic::InMemoryStore>());
    // A first save warms what a long run has warm (allocator, page tables); the second is timed.
    (void)ckpt.save_async(request(state, 0));
    (void)ckpt.wait();
    auto r = request(state, 0);
    r.step = 200;
    const auto start = Clock::now();
    (void)ckpt.save_async(std::move(r));
    const double stall = since(start);
    const auto done = ckpt.wait();
    std::printf("async_stall %.4f %llu\n", stall, static_cast<unsigned long long>(tensor_bytes));
    std::printf("async_total %.4f %llu\n", stall + done->write_seconds, static_cast<unsigned long long>(tensor_bytes));
  }

  // 3. Cold load of the 1-rank checkpoint (every tensor read and verified).
  const bool cold = drop_caches();
  std::printf("cache_dropped %d 0\n", cold ? 1 : 0);
  const double load_s = load_all(dir / "sync", tensor_bytes);
  std::printf("load_same %.4f %llu\n", load_s, static_cast<unsigned long long>(dir_bytes(dir / "sync")));

  // 4. Reshard: written by N ranks, loaded by a rank of another world (every rank reads the
  //    whole replicated state through the manifest's index, whatever shard holds it).
  fs::remove_all(dir / "reshard");
  const double nsave_s = save_with_ranks(dir / "reshard", state, reshard_writers);
  std::printf("save_%d_ranks %.4f %llu\n", reshard_writers, nsave_s,
              static_cast<unsigned long long>(dir_bytes(dir / "reshard")));
  drop_caches();
  const double reshard_s = load_all(dir / "reshard", tensor_bytes);
  std::printf("load_reshard %.4f %llu\n", reshard_s, static_cast<unsigned long long>(dir_bytes(dir / "reshard")));
  return 0;
}
