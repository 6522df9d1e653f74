// Checkpoint throughput, async stall and reshard load of a real BERT-base training state: a
// BertForSequenceClassification with bert-base-uncased's shapes (110 M float32 parameters)
// plus its AdamW exp_avg and exp_avg_sq after one step: about 1.3 GB. Run by
// bench/checkpoint_bench.sh, which measures `dd` on the same disk in the same invocation and
// prints the ratios; this program prints one "name seconds bytes" line per measurement.
//
//   checkpoint_bench DIR [--reshard-writers N]
//
// - save_sync: Checkpointer::save (write, fsync, checksums, commit) of the whole state, 1 rank.
// - async_stall: the time a training step is blocked by an async save: save_async() itself
//   plus the wait before the optimizer step for the copy that runs beside the forward and
//   backward pass (real ones: batch 8 x 128 tokens). step_plain / step_with_save are the
//   whole step's times without and with that save, to show what the overlap costs.
// - load_same: a cold resume of that checkpoint into the existing model and optimizer state
//   (read in place, as the Trainer and PyTorch DCP do); load_fresh: the same into newly
//   allocated tensors (each page then faults in once, which dd does not pay).
// - load_reshard: the same bytes written by N ranks, loaded in place by one.
// Cold reads drop the page cache first (echo 3 > /proc/sys/vm/drop_caches, root only); the
// output says whether that worked.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include "tenax/elastic/in_memory_store.h"
#include "tenax/sdk/checkpointer.h"
#include "tenax/sdk/models/bert.h"
#include "tenax/sdk/state_capture.h"

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

// A real training setup: bert-base shapes, AdamW, one batch of random tokens.
struct Training {
  std::shared_ptr<tenax::sdk::BertForSequenceClassification> model;
  std::unique_ptr<torch::optim::AdamW> optimizer;
  tenax::sdk::Batch batch;

  Training() {
    tenax::sdk::BertConfig config;  // defaults are bert-base-uncased's
    model = std::make_shared<tenax::sdk::BertForSequenceClassification>(config);
    optimizer = std::make_unique<torch::optim::AdamW>(model->parameters(), torch::optim::AdamWOptions(2e-5));
    batch.input_ids = torch::randint(1000, 30000, {8, 128}, torch::kInt64);
    batch.attention_mask = torch::ones({8, 128}, torch::kInt64);
    batch.token_type_ids = torch::zeros({8, 128}, torch::kInt64);
    batch.labels = torch::randint(0, 2, {8}, torch::kInt64);
  }
  void forward_backward() {
    optimizer->zero_grad();
    model->forward(batch).loss.backward();
  }
  NamedTensors params() const {
    NamedTensors out;
    for (const auto& item : model->named_parameters(true)) out.emplace_back(item.key(), item.value());
    return out;
  }
  // What the Trainer checkpoints: model/<name> and optim/<name>/..., as views.
  NamedTensors state() const {
    NamedTensors out;
    const NamedTensors p = params();
    for (const auto& [name, t] : p) out.emplace_back("model/" + name, t.detach());
    for (auto& e : tenax::sdk::capture_optimizer_state(*optimizer, p, tenax::sdk::Capture::kView))
      out.push_back(std::move(e));
    return out;
  }
};

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

tenax::sdk::SaveRequest request(const NamedTensors& state, int rank, bool copied_late = false) {
  tenax::sdk::SaveRequest r;
  r.step = 100;
  (copied_late ? r.replicated_copied_late : r.replicated) = state;
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

// Loads every model/optim tensor; in place into `into` when given. Returns the seconds.
double load_all(const fs::path& out, std::uint64_t expect_bytes, const NamedTensors* into) {
  tenax::sdk::Checkpointer reader(out, 0, 1, 0, std::make_unique<tenax::elastic::InMemoryStore>());
  std::map<std::string, torch::Tensor> destinations;
  if (into != nullptr) {
    for (const auto& [name, t] : *into) destinations.emplace(name, t);
  }
  const auto start = Clock::now();
  auto loaded =
      reader.load_latest([](const std::string& n) { return n.rfind("model/", 0) == 0 || n.rfind("optim/", 0) == 0; },
                         [&](const std::string& n) {
                           const auto it = destinations.find(n);
                           return it == destinations.end() ? torch::Tensor() : it->second;
                         });
  const double seconds = since(start);
  std::uint64_t got = 0;
  std::uint64_t in_place = 0;
  if (loaded) {
    for (const auto& [name, t] : loaded->tensors) {
      got += static_cast<std::uint64_t>(t.numel()) * t.element_size();
      const auto it = destinations.find(name);
      if (it != destinations.end() && it->second.data_ptr() == t.data_ptr())
        in_place += static_cast<std::uint64_t>(t.nbytes());
    }
  }
  if (got != expect_bytes || (into != nullptr && in_place + 8 * 1000 < expect_bytes)) {
    std::fprintf(stderr, "load of %s returned %llu bytes (%llu in place), expected %llu\n", out.c_str(),
                 static_cast<unsigned long long>(got), static_cast<unsigned long long>(in_place),
                 static_cast<unsigned long long>(expect_bytes));
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
  int save_repeats = 0;  // > 0: only time that many synchronous saves (for profiling)
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--reshard-writers") reshard_writers = std::atoi(argv[i + 1]);
    if (std::string(argv[i]) == "--save-repeats") save_repeats = std::atoi(argv[i + 1]);
  }
  torch::manual_seed(0);
  Training training;
  training.forward_backward();
  training.optimizer->step();  // creates the AdamW state
  const NamedTensors state = training.state();
  const std::uint64_t tensor_bytes = bytes_of(state);
  std::printf("state %llu bytes in %zu tensors\n", static_cast<unsigned long long>(tensor_bytes), state.size());

  for (int i = 0; i < save_repeats; ++i) {
    fs::remove_all(dir / "sync");
    std::printf("save_sync %.4f\n", save_with_ranks(dir / "sync", state, 1));
  }
  if (save_repeats > 0) return 0;

  // 1. Synchronous save, one rank: the whole write + fsync + commit. An untimed save of the
  //    same bytes first: on a thin-provisioned VM disk the first write to never-used blocks is
  //    several times slower than a rewrite, and dd (checkpoint_bench.sh) gets the same warm-up.
  fs::remove_all(dir / "sync");
  (void)save_with_ranks(dir / "warmup", state, 1);
  fs::remove_all(dir / "warmup");
  const double sync_s = save_with_ranks(dir / "sync", state, 1);
  std::printf("save_sync %.4f %llu\n", sync_s, static_cast<unsigned long long>(dir_bytes(dir / "sync")));

  // 2. Async save in a training step, one rank, as the Trainer does it.
  fs::remove_all(dir / "async");
  {
    tenax::sdk::Checkpointer ckpt(dir / "async", 0, 1, 0, std::make_unique<tenax::elastic::InMemoryStore>());
    // A first save warms what a long run has warm (staging buffers, page tables).
    (void)ckpt.save_async(request(state, 0, true));
    (void)ckpt.wait();
    auto step_start = Clock::now();
    training.forward_backward();
    training.optimizer->step();
    const double step_plain = since(step_start);

    auto r = request(state, 0, true);
    r.step = 200;
    step_start = Clock::now();
    (void)ckpt.save_async(std::move(r));
    const double call = since(step_start);
    training.forward_backward();
    const auto wait_start = Clock::now();
    ckpt.wait_for_snapshot();
    const double blocked = since(wait_start);
    training.optimizer->step();
    const double step_with_save = since(step_start);
    const auto done = ckpt.wait();
    if (!done || !done->committed) {
      std::fprintf(stderr, "async save failed: %s\n", done ? done->error.c_str() : "no result");
      return 1;
    }
    std::printf("async_stall %.4f %llu\n", call + blocked, static_cast<unsigned long long>(tensor_bytes));
    std::printf("async_call %.4f 0\n", call);
    std::printf("async_wait_before_update %.4f 0\n", blocked);
    std::printf("step_plain %.4f 0\n", step_plain);
    std::printf("step_with_save %.4f 0\n", step_with_save);
  }

  // 3. Cold loads of the 1-rank checkpoint (every tensor read and verified).
  const bool cold = drop_caches();
  std::printf("cache_dropped %d 0\n", cold ? 1 : 0);
  const NamedTensors live = training.state();
  const double load_s = load_all(dir / "sync", tensor_bytes, &live);
  std::printf("load_same %.4f %llu\n", load_s, static_cast<unsigned long long>(dir_bytes(dir / "sync")));
  drop_caches();
  const double fresh_s = load_all(dir / "sync", tensor_bytes, nullptr);
  std::printf("load_fresh %.4f %llu\n", fresh_s, static_cast<unsigned long long>(dir_bytes(dir / "sync")));

  // 4. Reshard: written by N ranks, loaded by a rank of another world (every rank reads the
  //    whole replicated state through the manifest's index, whatever shard holds it).
  fs::remove_all(dir / "reshard");
  const double nsave_s = save_with_ranks(dir / "reshard", state, reshard_writers);
  std::printf("save_%d_ranks %.4f %llu\n", reshard_writers, nsave_s,
              static_cast<unsigned long long>(dir_bytes(dir / "reshard")));
  drop_caches();
  const double reshard_s = load_all(dir / "reshard", tensor_bytes, &live);
  std::printf("load_reshard %.4f %llu\n", reshard_s, static_cast<unsigned long long>(dir_bytes(dir / "reshard")));
  return 0;
}
