// No split brain (issue 12, point 4): a generation that a newer one replaced cannot commit a
// checkpoint or move `latest`. Ranks run as threads; "the rendezvous forms a new generation" is
// GenerationFence::advance(), as the rendezvous service calls it before it assigns one.
#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include <gtest/gtest.h>

#include "support/temp_dir.h"
#include "support/thread_ranks.h"
#include "tenax/core/error.h"
#include "tenax/core/files.h"
#include "tenax/elastic/gloo_communicator.h"
#include "tenax/elastic/generation_fence.h"
#include "tenax/elastic/in_memory_store.h"
#include "tenax/sdk/checkpointer.h"
#include "tenax/sdk/trainer.h"
#include "tenax/storage/checkpoint_directory.h"
#include "tenax/storage/layout.h"
#include "tenax/storage/manifest.h"

namespace tenax::sdk {
namespace {

namespace fs = std::filesystem;
using elastic::GenerationFence;

fs::path fresh_dir(const std::string& name) {
  auto dir = tenax::testing::fresh_dir("fencing", name);
  fs::create_directories(dir / "control");  // the job's shared control directory
  return dir;
}

SaveRequest request(std::int64_t step, float value) {
  SaveRequest r;
  r.step = step;
  r.replicated = {{"model/w", torch::full({64}, value)}, {"model/b", torch::full({8}, value)}};
  return r;
}

// What `latest` names ("" when there is none).
std::string latest(const fs::path& out) {
  const fs::path file = out / "checkpoints" / storage::kLatestFile;
  return fs::exists(file) ? files::read_all(file) : "";
}

std::string step_name(std::int64_t step) { return storage::step_dir_name(step); }

// The generation recorded in a committed step's manifest; -1 when the step is not committed.
std::int64_t written_by(const fs::path& out, std::int64_t step) {
  const fs::path manifest = storage::CheckpointDirectory(out / "checkpoints").step_dir(step) / storage::kManifestFile;
  if (!fs::exists(manifest)) return -1;
  auto parsed = storage::parse_manifest(files::read_all(manifest), manifest.string());
  return parsed.is_ok() ? parsed.value().generation : -1;
}

float saved_value(const fs::path& out) {
  Checkpointer reader(out, 0, 1, 0, std::make_unique<elastic::InMemoryStore>());
  auto loaded = reader.load_latest([](const std::string&) { return true; });
  return loaded ? loaded->get("model/w")[0].item<float>() : -1.0f;
}

std::string fenced_message(std::int64_t stale, std::int64_t current, std::int64_t step) {
  return "generation " + std::to_string(stale) + " is no longer current (generation " + std::to_string(current) +
         " formed): this partition must not commit checkpoint step " + std::to_string(step) + "; not moving latest";
}

TEST(SdkCheckpointFencing, AReplacedGenerationCommitsNothingAndTheCurrentOneCommits) {
  const fs::path out = fresh_dir("replaced");
  GenerationFence fence(out / "control");
  ASSERT_TRUE(fence.advance(1).is_ok());
  testing::run_contexts(
      2, [&](elastic::WorkerContext& ctx) { Checkpointer(out, ctx).save(request(10, 1.0f)); }, 1, fence);
  ASSERT_EQ(latest(out), step_name(10));

  ASSERT_TRUE(fence.advance(2).is_ok());  // generation 2 formed without these two ranks
  std::vector<SaveResult> results(2);
  testing::run_contexts(
      2,
      [&](elastic::WorkerContext& ctx) {
        Checkpointer ckpt(out, ctx);
        ckpt.save_async(request(20, 2.0f));
        results[static_cast<std::size_t>(ctx.rank())] = *ckpt.wait();
        // The synchronous save says it with an exception.
        EXPECT_THROW(ckpt.save(request(21, 2.0f)), RendezvousError);
      },
      1, fence);
  for (const SaveResult& r : results) {
    EXPECT_FALSE(r.committed);
    EXPECT_TRUE(r.fenced) << "every rank learns that it was fenced, not just that the save failed";
    EXPECT_EQ(r.error, fenced_message(1, 2, 20));
  }
  EXPECT_FALSE(fs::exists(out / "checkpoints" / step_name(20)));
  EXPECT_FALSE(fs::exists(out / "checkpoints" / step_name(21)));
  EXPECT_EQ(latest(out), step_name(10));
  EXPECT_TRUE(storage::CheckpointDirectory(out / "checkpoints").uncommitted_dirs().empty());

  testing::run_contexts(
      2, [&](elastic::WorkerContext& ctx) { Checkpointer(out, ctx).save(request(20, 3.0f)); }, 2, fence);
  EXPECT_EQ(latest(out), step_name(20));
  EXPECT_EQ(written_by(out, 20), 2);
  EXPECT_EQ(saved_value(out), 3.0f);
}

// Rank 1's store view: when its writer reports its shard (so rank 0 has already prepared and
// checked the fence once, and now waits for this report before it commits), a new generation
// forms. Only the fence held around the rename can stop that commit.
class AdvanceOnReport final : public elastic::Store {
 public:
  AdvanceOnReport(std::unique_ptr<elastic::Store> inner, GenerationFence fence, std::int64_t next)
      : inner_(std::move(inner)), fence_(std::move(fence)), next_(next) {}
  void set(const std::string& key, const std::vector<char>& value) override {
    if (key.find("/report/1") != std::string::npos) advanced = fence_.advance(next_).is_ok();
    inner_->set(key, value);
  }
  std::vector<char> get(const std::string& key, std::chrono::milliseconds timeout) override {
    return inner_->get(key, timeout);
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override { return inner_->add(key, delta); }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    inner_->wait(keys, timeout);
  }
  std::atomic<bool> advanced{false};

 private:
  std::unique_ptr<elastic::Store> inner_;
  GenerationFence fence_;
  std::int64_t next_;
};

TEST(SdkCheckpointFencing, AGenerationFormingWhileTheShardsAreWrittenStopsTheRenameAndLatest) {
  const fs::path out = fresh_dir("during");
  GenerationFence fence(out / "control");
  ASSERT_TRUE(fence.advance(1).is_ok());
  CheckpointerOptions options;
  options.fence_dir = fence.dir();
  elastic::InMemoryStore shared;
  auto view = [&shared] { return std::make_unique<elastic::PrefixStore>(elastic::generation_prefix(1), shared); };
  auto rank1_store = std::make_unique<AdvanceOnReport>(view(), fence, 2);
  AdvanceOnReport& rank1_view = *rank1_store;
  Checkpointer rank0(out, 0, 2, 1, view(), options);
  Checkpointer rank1(out, 1, 2, 1, std::move(rank1_store), options);

  std::vector<SaveResult> results(2);
  std::thread t0([&] {
    rank0.save_async(request(10, 1.0f));
    results[0] = *rank0.wait();
  });
  std::thread t1([&] {
    rank1.save_async(request(10, 1.0f));
    results[1] = *rank1.wait();
  });
  t0.join();
  t1.join();
  ASSERT_TRUE(rank1_view.advanced) << "the seam did not run: the test proves nothing";
  for (const SaveResult& r : results) {
    EXPECT_FALSE(r.committed);
    EXPECT_TRUE(r.fenced);
    EXPECT_EQ(r.error, fenced_message(1, 2, 10));
  }
  EXPECT_FALSE(fs::exists(out / "checkpoints" / step_name(10)));
  EXPECT_EQ(latest(out), "");
  EXPECT_TRUE(storage::CheckpointDirectory(out / "checkpoints").uncommitted_dirs().empty())
      << "the fenced save's tmp directory is removed";
}

// Both partitions are alive at once and save into the same output directory in turns, as two
// halves of a job that lost sight of each other would: A is generation 1, B is generation 2,
// which formed (without A) after A's first save. Only B's saves may land, and `latest` must
// never name a checkpoint of A's after B formed — also when A saves a step B already saved
// (old code moved B's directory aside for it) or a step beyond B's (old code moved `latest`
// there).
TEST(SdkCheckpointFencing, TwoPartitionsSavingInTurnsIntoOneDirectory) {
  const fs::path out = fresh_dir("partition");
  GenerationFence fence(out / "control");
  CheckpointerOptions options;
  options.fence_dir = fence.dir();

  struct Partition {
    std::int64_t generation;
    elastic::InMemoryStore store;  // each partition reaches only its own rendezvous
    std::vector<std::unique_ptr<Checkpointer>> ranks;
  };
  auto form = [&](Partition& p) {
    ASSERT_TRUE(fence.advance(p.generation).is_ok());
    for (int r = 0; r < 2; ++r) {
      p.ranks.push_back(std::make_unique<Checkpointer>(
          out, r, 2, p.generation,
          std::make_unique<elastic::PrefixStore>(elastic::generation_prefix(p.generation), p.store), options));
    }
  };
  // One collective save of `p` (its two ranks as threads); rank 0's result.
  auto save = [](Partition& p, std::int64_t step, float value) {
    std::vector<SaveResult> results(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        p.ranks[static_cast<std::size_t>(r)]->save_async(request(step, value));
        results[static_cast<std::size_t>(r)] = *p.ranks[static_cast<std::size_t>(r)]->wait();
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(results[0].committed, results[1].committed) << "the ranks of one save disagree";
    EXPECT_EQ(results[0].fenced, results[1].fenced);
    return results[0];
  };

  Partition a;
  a.generation = 1;
  Partition b;
  b.generation = 2;
  form(a);
  ASSERT_TRUE(save(a, 10, 1.0f).committed);
  form(b);  // generation 2: from here on A is stale
  struct Turn {
    Partition* who;
    std::int64_t step;
    float value;
  };
  const std::vector<Turn> turns = {{&b, 20, 2.0f},  {&a, 20, -1.0f}, {&b, 30, 3.0f}, {&a, 40, -1.0f},
                                   {&a, 50, -1.0f}, {&b, 40, 4.0f},  {&a, 60, -1.0f}};
  float expected = 1.0f;
  for (const Turn& turn : turns) {
    const SaveResult result = save(*turn.who, turn.step, turn.value);
    const bool stale = turn.who == &a;
    EXPECT_EQ(result.committed, !stale) << "step " << turn.step << " of generation " << turn.who->generation << ": "
                                        << result.error;
    EXPECT_EQ(result.fenced, stale) << "step " << turn.step;
    if (!stale) expected = turn.value;
    const std::string named = latest(out);
    ASSERT_EQ(named.rfind("step-", 0), 0u) << named;
    const std::int64_t latest_step = std::stoll(named.substr(5));
    EXPECT_EQ(written_by(out, latest_step), 2)
        << "after step " << turn.step << ", `latest` names " << named << ", which generation 2 did not write";
    EXPECT_EQ(saved_value(out), expected) << "after step " << turn.step;
  }
  // Every checkpoint on disk: step 10 from generation 1 (before 2 formed), the rest from 2.
  const std::vector<std::int64_t> committed = storage::CheckpointDirectory(out / "checkpoints").committed_steps();
  EXPECT_EQ(committed, (std::vector<std::int64_t>{10, 20, 30, 40}));
  EXPECT_EQ(written_by(out, 10), 1);
  for (std::int64_t step : {20, 30, 40}) EXPECT_EQ(written_by(out, step), 2) << "step " << step;
  EXPECT_EQ(latest(out), step_name(40));
}

// The Trainer of a stale partition must not go on training as if it had saved. Whatever
// on_save_error says, the fenced save ends train() with RendezvousError (the program exits 1,
// not 3: nothing was saved to resume from), and nothing of it is committed.
class Points final : public Dataset {
 public:
  std::int64_t size() const override { return 32; }
  Example get(std::int64_t i) const override {
    auto x = torch::full({4}, static_cast<float>(i) / 32.0f);
    return {x, x.sum().unsqueeze(0)};
  }
};

class Linear final : public Model {
 public:
  Linear() : fc_(register_module("fc", torch::nn::Linear(4, 1))) {}
  ModelOutput forward(const Batch& batch) override {
    ModelOutput o;
    o.logits = fc_(batch.inputs);
    o.loss = torch::mse_loss(o.logits, batch.labels);
    return o;
  }

 private:
  torch::nn::Linear fc_;
};

// At the end of step 15 a new generation forms without this process, once the save of step 10
// has committed (an async save may still be in flight; it would be fenced too, correctly, but
// this test is about what the Trainer does next).
class NewGenerationAtStep15 final : public TrainerCallback {
 public:
  NewGenerationAtStep15(GenerationFence fence, fs::path out) : fence_(std::move(fence)), out_(std::move(out)) {}
  void on_step_end(const TrainingArguments&, TrainerState& s, TrainerControl&) override {
    last_step = s.global_step;
    if (s.global_step != 15) return;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(2);
    while (latest(out_) != step_name(10) && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_EQ(latest(out_), step_name(10)) << "the save of step 10 never committed";
    EXPECT_TRUE(fence_.advance(2).is_ok());
  }
  void on_save_error(const TrainingArguments&, TrainerState&, TrainerControl&, const std::string& e) override {
    errors.push_back(e);
  }
  std::int64_t last_step = 0;
  std::vector<std::string> errors;

 private:
  GenerationFence fence_;
  fs::path out_;
};

void expect_a_fenced_trainer_stops(bool save_async, std::int64_t stops_at) {
  const fs::path out = fresh_dir(save_async ? "trainer-async" : "trainer-sync");
  GenerationFence fence(out / "control");
  ASSERT_TRUE(fence.advance(1).is_ok());
  elastic::WorkerIdentity id;
  id.generation = 1;
  elastic::WorkerContext ctx(id, nullptr, elastic::make_local_communicator(), {}, fence);
  TrainingArguments args;
  args.output_dir = out.string();
  args.max_steps = 30;
  args.save_steps = 10;
  args.logging_steps = 10;
  args.per_device_train_batch_size = 4;
  args.on_save_error = "continue";
  args.save_async = save_async;
  Trainer trainer(std::make_shared<Linear>(), args, std::make_shared<Points>(), ctx);
  auto watch = std::make_shared<NewGenerationAtStep15>(fence, out);
  trainer.add_callback(watch);
  try {
    trainer.train();
    ADD_FAILURE() << "train() returned although generation 1 was replaced at step 15";
  } catch (const RendezvousError& e) {
    EXPECT_NE(std::string(e.what()).find(fenced_message(1, 2, 20)), std::string::npos) << e.what();
  }
  EXPECT_EQ(watch->last_step, stops_at);
  EXPECT_EQ(watch->errors.size(), 1u) << "the callbacks hear of the fenced save";
  EXPECT_EQ(latest(out), step_name(10));
  EXPECT_EQ(storage::CheckpointDirectory(out / "checkpoints").committed_steps(), std::vector<std::int64_t>{10});
}

TEST(SdkCheckpointFencing, AFencedTrainerStopsAtTheFencedSaveWhateverOnSaveErrorSays) {
  expect_a_fenced_trainer_stops(/*save_async=*/false, /*stops_at=*/20);
}

TEST(SdkCheckpointFencing, AFencedAsyncSaveStopsTheTrainerAtTheNextSavePoint) {
  // The result of step 20's save is collected when step 30's save starts.
  expect_a_fenced_trainer_stops(/*save_async=*/true, /*stops_at=*/30);
}

}  // namespace
}  // namespace tenax::sdk
