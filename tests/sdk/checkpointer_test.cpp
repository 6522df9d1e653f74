#include "tenax/sdk/checkpointer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <torch/torch.h>

#include <gtest/gtest.h>

#include "support/temp_dir.h"
#include "support/thread_ranks.h"
#include "tenax/core/error.h"
#include "tenax/elastic/in_memory_store.h"
#include "tenax/elastic/in_process_recovery.h"
#include "tenax/storage/checkpoint_directory.h"
#include "tenax/sdk/user_state.h"

namespace tenax::sdk {
namespace {

std::filesystem::path fresh_dir(const std::string& name) { return tenax::testing::fresh_path("sdk", name); }

NamedTensors replicated_state(float scale) {
  return {{"model/a.weight", torch::arange(0, 300, torch::kFloat32).reshape({30, 10}) * scale},
          {"model/a.bias", torch::full({10}, scale)},
          {"model/big", torch::ones({1000}) * scale},
          {"optim/a.weight/step", torch::tensor(int64_t{7})}};
}

bool wants_all(const std::string&) { return true; }

// A single-process Checkpointer (world 1, its own in-memory store).
std::unique_ptr<Checkpointer> solo(const std::filesystem::path& out, CheckpointerOptions options = {}) {
  return std::make_unique<Checkpointer>(out, 0, 1, 0, std::make_unique<elastic::InMemoryStore>(), options);
}

SaveRequest request(std::int64_t step, NamedTensors replicated, NamedTensors per_rank = {}) {
  SaveRequest r;
  r.step = step;
  r.replicated = std::move(replicated);
  r.per_rank = std::move(per_rank);
  return r;
}

TEST(SdkCheckpointer, TwoRanksSaveOneCheckpointThatEachRankLoads) {
  const auto out = fresh_dir("ckpt2");
  testing::run_contexts(2, [&](elastic::WorkerContext& ctx) {
    Checkpointer ckpt(out, ctx);
    SaveRequest r =
        request(10, replicated_state(1.0f),
                {{"rng/rank" + std::to_string(ctx.rank()) + "/cpu", torch::full({16}, ctx.rank() + 1, torch::kUInt8)}});
    r.trainer_state = {{"global_step", 10}};
    r.arguments = {{"seed", 1}};
    ckpt.save(std::move(r));
  });
  const auto root = out / "checkpoints";
  EXPECT_TRUE(std::filesystem::exists(root / "step-000000010" / "manifest.json"));
  EXPECT_TRUE(std::filesystem::exists(root / "step-000000010" / "shard-00000-of-00002.h5"));
  EXPECT_TRUE(std::filesystem::exists(root / "step-000000010" / "shard-00001-of-00002.h5"));

  auto loaded = solo(out)->load_latest(wants_all);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->step, 10);
  EXPECT_EQ(loaded->world_size, 2);
  for (const auto& [name, t] : replicated_state(1.0f)) EXPECT_TRUE(torch::equal(loaded->get(name), t)) << name;
  EXPECT_TRUE(torch::equal(loaded->get("rng/rank1/cpu"), torch::full({16}, 2, torch::kUInt8)));
  EXPECT_EQ(loaded->trainer_state["global_step"], 10);
}

TEST(SdkCheckpointer, CorruptNewestFallsBackToPrevious) {
  const auto out = fresh_dir("fallback");
  auto ckpt = solo(out);
  ckpt->save(request(5, replicated_state(1.0f)));
  ckpt->save(request(10, replicated_state(2.0f)));
  // Flip bytes in the middle of the newest shard (the tensor data dominates the file).
  const auto shard = out / "checkpoints" / "step-000000010" / "shard-00000-of-00001.h5";
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(std::filesystem::file_size(shard) / 2));
    const char junk[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    f.write(junk, sizeof junk);
  }
  auto loaded = ckpt->load_latest(wants_all);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->step, 5);
  EXPECT_TRUE(torch::equal(loaded->get("model/big"), torch::ones({1000})));
}

// replicated_copied_late: the writer copies; after wait_for_snapshot() the caller may change
// the tensors and the checkpoint still holds the values of the call.
TEST(SdkCheckpointer, LateCopyHoldsTheValuesOfTheCallOnceWaitedFor) {
  const auto out = fresh_dir("late");
  auto ckpt = solo(out);
  NamedTensors live = replicated_state(3.0f);
  SaveRequest r = request(5, {{"sampler", torch::tensor({int64_t{1}, int64_t{2}})}});
  r.replicated_copied_late = live;
  ASSERT_FALSE(ckpt->save_async(std::move(r)).has_value());
  ckpt->wait_for_snapshot();
  for (auto& [name, t] : live) t.add_(100);  // what the optimizer step does next
  const auto result = ckpt->wait();
  ASSERT_TRUE(result && result->committed) << (result ? result->error : "no result");
  auto loaded = solo(out)->load_latest(wants_all);
  ASSERT_TRUE(loaded.has_value());
  for (const auto& [name, t] : replicated_state(3.0f)) EXPECT_TRUE(torch::equal(loaded->get(name), t)) << name;
  EXPECT_TRUE(torch::equal(loaded->get("sampler"), torch::tensor({int64_t{1}, int64_t{2}})));
}

// save() writes from the caller's tensors without a copy; those must never become the staging
// buffers a later async snapshot copies into.
TEST(SdkCheckpointer, SynchronousSaveNeverLendsTheCallersTensorsToLaterSnapshots) {
  const auto out = fresh_dir("nocopy");
  auto ckpt = solo(out);
  NamedTensors mine = replicated_state(1.0f);
  ckpt->save(request(5, mine));
  ckpt->save_async(request(10, replicated_state(2.0f)));
  ASSERT_TRUE(ckpt->wait()->committed);
  for (const auto& [name, t] : replicated_state(1.0f)) {
    const auto it = std::find_if(mine.begin(), mine.end(), [&](const auto& e) { return e.first == name; });
    EXPECT_TRUE(torch::equal(it->second, t)) << name << " was overwritten";
  }
  EXPECT_TRUE(torch::equal(solo(out)->load_latest(wants_all)->get("model/big"), torch::ones({1000}) * 2));
}

// A load into the caller's tensors (the Trainer's parameters) fills them in place.
TEST(SdkCheckpointer, LoadFillsGivenDestinationsInPlace) {
  const auto out = fresh_dir("inplace");
  auto ckpt = solo(out);
  ckpt->save(request(5, replicated_state(4.0f)));
  torch::Tensor big = torch::zeros({1000});
  torch::Tensor wrong_shape = torch::zeros({3});
  const void* big_memory = big.data_ptr();
  auto loaded = ckpt->load_latest(wants_all, [&](const std::string& name) {
    if (name == "model/big") return big;
    if (name == "model/a.bias") return wrong_shape;  // does not fit: a new tensor instead
    return torch::Tensor();
  });
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->get("model/big").data_ptr(), big_memory);
  EXPECT_TRUE(torch::equal(big, torch::ones({1000}) * 4));
  EXPECT_TRUE(torch::equal(loaded->get("model/a.bias"), torch::full({10}, 4.0f)));
  EXPECT_TRUE(torch::equal(wrong_shape, torch::zeros({3})));
}

// Every checkpoint damaged after the in-place read began: refuse rather than train on from
// half-overwritten weights.
TEST(SdkCheckpointer, AllCheckpointsDamagedAfterAnInPlaceReadThrows) {
  const auto out = fresh_dir("clobbered");
  auto ckpt = solo(out);
  ckpt->save(request(5, replicated_state(1.0f)));
  const auto shard = out / "checkpoints" / "step-000000005" / "shard-00000-of-00001.h5";
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(std::filesystem::file_size(shard) - 16));
    f.write("garbage!", 8);
  }
  torch::Tensor big = torch::zeros({1000});
  EXPECT_FALSE(ckpt->load_latest(wants_all).has_value());  // nothing given in place: nullopt
  try {
    ckpt->load_latest(wants_all, [&](const std::string& name) { return name == "model/big" ? big : torch::Tensor(); });
    FAIL() << "expected StorageError";
  } catch (const StorageError& e) {
    EXPECT_NE(std::string(e.what()).find("in place"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("move"), std::string::npos) << e.what();
  }
}

TEST(SdkCheckpointer, UncommittedDirectoryIsIgnored) {
  const auto out = fresh_dir("uncommitted");
  auto ckpt = solo(out);
  EXPECT_FALSE(ckpt->load_latest(wants_all).has_value());
  ckpt->save(request(5, replicated_state(1.0f)));
  // A crash after writing shards but before the manifest leaves a .tmp directory behind.
  const auto tmp = out / "checkpoints" / ".tmp-step-000000009-g0";
  std::filesystem::create_directories(tmp);
  std::filesystem::copy_file(out / "checkpoints" / "step-000000005" / "shard-00000-of-00001.h5",
                             tmp / "shard-00000-of-00001.h5");
  auto loaded = ckpt->load_latest(wants_all);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->step, 5);
  // A new Checkpointer (a restarted job) removes the leftover before its first save.
  ckpt.reset();
  ckpt = solo(out);
  EXPECT_FALSE(std::filesystem::exists(tmp));
}

TEST(SdkCheckpointer, AFailedWriteCommitsNothingAndKeepsThePrevious) {
  const auto out = fresh_dir("readonly");
  auto ckpt = solo(out);
  ckpt->save(request(5, replicated_state(1.0f)));
  // An unsupported dtype on the way in must fail cleanly before anything is committed.
  NamedTensors bad = replicated_state(2.0f);
  bad.emplace_back("model/weird", torch::zeros({2}, torch::kInt32));
  EXPECT_THROW(ckpt->save(request(10, bad)), StorageError);
  auto loaded = ckpt->load_latest(wants_all);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->step, 5);
}

TEST(SdkCheckpointer, AsyncSaveSnapshotsAtTheCallNotAtTheWrite) {
  const auto out = fresh_dir("snapshot");
  auto ckpt = solo(out);
  torch::Tensor live = torch::ones({4096});
  EXPECT_FALSE(ckpt->save_async(request(1, {{"model/live", live}})).has_value());
  live.fill_(7.0f);  // training goes on while the writer writes
  auto done = ckpt->wait();
  ASSERT_TRUE(done.has_value());
  ASSERT_TRUE(done->committed) << done->error;
  EXPECT_FALSE(ckpt->wait().has_value()) << "a result is collected once";
  EXPECT_TRUE(torch::equal(ckpt->load_latest(wants_all)->get("model/live"), torch::ones({4096})));
}

// reserve_snapshot maps the buffers a save copies into ahead of time; what is saved is still
// the value at the save, whatever the buffer held, and a buffer that no longer fits (the
// tensor's shape changed) is not used.
TEST(SdkCheckpointer, AReservedSnapshotHoldsTheValueAtTheSaveNotAtTheReservation) {
  const auto out = fresh_dir("reserve");
  auto ckpt = solo(out);
  torch::Tensor field = torch::ones({64, 64}, torch::kFloat64);
  ckpt->reserve_snapshot({{"state/field", field}});
  field.fill_(2.0);
  EXPECT_FALSE(ckpt->save_async(request(1, {{"state/field", field}})).has_value());
  field.fill_(3.0);  // the solver goes on
  // A reservation while a save is in flight leaves that save's buffers alone.
  ckpt->reserve_snapshot({{"state/field", field}});
  ASSERT_TRUE(ckpt->wait()->committed);
  EXPECT_TRUE(
      torch::equal(ckpt->load_latest(wants_all)->get("state/field"), torch::full({64, 64}, 2.0, torch::kFloat64)));

  torch::Tensor regridded = torch::full({32, 8}, 4.0, torch::kFloat64);
  ckpt->reserve_snapshot({{"state/field", torch::zeros({64, 64}, torch::kFloat64)}});
  EXPECT_FALSE(ckpt->save_async(request(2, {{"state/field", regridded}})).has_value());
  regridded.fill_(5.0);
  ASSERT_TRUE(ckpt->wait()->committed);
  EXPECT_TRUE(
      torch::equal(ckpt->load_latest(wants_all)->get("state/field"), torch::full({32, 8}, 4.0, torch::kFloat64)));
}

TEST(SdkCheckpointer, AFailedBackgroundWriteIsReportedAndNeverHarmsTheEarlierCheckpoint) {
  const auto out = fresh_dir("bgfail");
  auto ckpt = solo(out);
  ckpt->save(request(5, replicated_state(1.0f)));
  // A name HDF5 cannot hold fails inside the writer thread, after save_async has returned.
  NamedTensors bad = replicated_state(2.0f);
  bad.emplace_back("model/a//b", torch::zeros({2}));
  EXPECT_FALSE(ckpt->save_async(request(10, bad)).has_value());
  auto failed = ckpt->wait();
  ASSERT_TRUE(failed.has_value());
  EXPECT_FALSE(failed->committed);
  EXPECT_NE(failed->error.find("rank 0"), std::string::npos) << failed->error;
  EXPECT_NE(failed->error.find("previous checkpoint is intact"), std::string::npos) << failed->error;
  storage::CheckpointDirectory dir(out / "checkpoints");
  EXPECT_EQ(dir.committed_steps(), std::vector<std::int64_t>{5});
  EXPECT_TRUE(dir.uncommitted_dirs().empty()) << "the failed save's tmp directory is removed";
  auto loaded = ckpt->load_latest(wants_all);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->step, 5);
  // The next save works again.
  ckpt->save(request(15, replicated_state(3.0f)));
  EXPECT_EQ(ckpt->load_latest(wants_all)->step, 15);
}

TEST(SdkCheckpointer, AFailureOnOneRankCommitsNothingAndEveryRankIsTold) {
  const auto out = fresh_dir("rankfail");
  std::vector<SaveResult> results(3);
  testing::run_contexts(3, [&](elastic::WorkerContext& ctx) {
    Checkpointer ckpt(out, ctx);
    ckpt.save(request(5, replicated_state(1.0f)));
    NamedTensors per_rank{{"rng/rank" + std::to_string(ctx.rank()) + "/cpu", torch::ones({4}, torch::kUInt8)}};
    if (ctx.rank() == 2) per_rank.emplace_back("bad//name", torch::ones({1}));
    (void)ckpt.save_async(request(10, replicated_state(2.0f), per_rank));
    results[static_cast<std::size_t>(ctx.rank())] = *ckpt.wait();
  });
  for (const SaveResult& r : results) {
    EXPECT_FALSE(r.committed);
    EXPECT_NE(r.error.find("rank 2"), std::string::npos) << r.error;
  }
  EXPECT_EQ(storage::CheckpointDirectory(out / "checkpoints").committed_steps(), std::vector<std::int64_t>{5});
}

// In-process recovery: rank 2 dies before it writes its shard, and the agent marks generation 0
// superseded. The survivors' commit ends at once with `superseded` (a lost peer, not a storage
// failure) instead of waiting out the commit timeout for a shard that never comes; before the
// mark existed a survivor blocked in the next save until the timeout while the job could heal.
TEST(SdkCheckpointer, ASaveWaitingOnADeadPeerEndsSupersededWhenTheAgentMarksTheGeneration) {
  const auto out = fresh_dir("superseded");
  std::vector<SaveResult> results(2);
  CheckpointerOptions options;
  options.commit_timeout = std::chrono::minutes(5);
  testing::run_contexts(3, [&](elastic::WorkerContext& ctx) {
    if (ctx.rank() == 2) {
      // Dead: no shard. What the agent does when it declares the next generation.
      ctx.store()->add(elastic::kSupersededKey, 1);
      return;
    }
    Checkpointer ckpt(out, ctx, options);
    (void)ckpt.save_async(request(10, replicated_state(2.0f)));
    results[static_cast<std::size_t>(ctx.rank())] = *ckpt.wait();
  });
  for (const SaveResult& r : results) {
    EXPECT_FALSE(r.committed);
    EXPECT_TRUE(r.superseded) << r.error;
    EXPECT_FALSE(r.fenced);
    EXPECT_NE(r.error.find("a peer was lost"), std::string::npos) << r.error;
  }
  EXPECT_TRUE(storage::CheckpointDirectory(out / "checkpoints").committed_steps().empty());
}

TEST(SdkCheckpointer, RetentionKeepsTheNewestAndTheBestByMetric) {
  const auto out = fresh_dir("retention");
  CheckpointerOptions options;
  options.save_total_limit = 2;
  options.metric_for_best_model = "eval_loss";
  options.greater_is_better = false;
  auto ckpt = solo(out, options);
  const std::vector<double> losses = {0.9, 0.3, 0.5, 0.6, 0.7};
  for (std::size_t i = 0; i < losses.size(); ++i) {
    SaveRequest r = request(static_cast<std::int64_t>(10 * (i + 1)), replicated_state(1.0f));
    r.metrics = {{"eval_loss", losses[i]}};
    ckpt->save(std::move(r));
  }
  // transformers' rule: 2 survive, the best (20) and the newest (50) counted among them.
  EXPECT_EQ(storage::CheckpointDirectory(out / "checkpoints").committed_steps(), (std::vector<std::int64_t>{20, 50}));
}

// N ranks write, M ranks read (N, M in 1..8): every rank finds every replicated tensor, bit for
// bit, whichever shard holds it; rank r < N finds its own per-rank state, ranks >= N find none
// (the Trainer then derives one, see docs/checkpoints.md, "Resume semantics").
class SdkCheckpointerReshard : public ::testing::TestWithParam<int> {};

TEST_P(SdkCheckpointerReshard, WrittenByNLoadsIntoAnyM) {
  const int writers = GetParam();
  const auto out = fresh_dir("reshard" + std::to_string(writers));
  NamedTensors replicated;
  for (int i = 0; i < 13; ++i) {
    replicated.emplace_back("model/layer" + std::to_string(i) + ".weight",
                            torch::arange(0, 37 * (i + 1), torch::kFloat32) * (i + 1));
  }
  replicated.emplace_back("model/half", torch::arange(0, 64, torch::kFloat32).to(torch::kFloat16));
  replicated.emplace_back("model/bf16", torch::arange(0, 64, torch::kFloat32).to(torch::kBFloat16));
  replicated.emplace_back("sampler", torch::tensor({42, 1, 320, 32}, torch::kInt64));
  testing::run_contexts(writers, [&](elastic::WorkerContext& ctx) {
    Checkpointer ckpt(out, ctx);
    ckpt.save(request(30, replicated, {{cpu_rng_name(ctx.rank()), torch::full({8}, ctx.rank(), torch::kUInt8)}}));
  });
  auto ckpt = solo(out);
  for (int readers = 1; readers <= 8; ++readers) {
    for (int rank = 0; rank < readers; ++rank) {
      const std::string mine = "rng/rank" + std::to_string(rank) + "/";
      auto loaded = ckpt->load_latest(
          [&](const std::string& n) { return n.rfind("model/", 0) == 0 || n == "sampler" || n.rfind(mine, 0) == 0; });
      ASSERT_TRUE(loaded.has_value());
      EXPECT_EQ(loaded->world_size, writers);
      for (const auto& [name, t] : replicated) {
        ASSERT_TRUE(loaded->get(name).defined()) << name << " for rank " << rank << " of " << readers;
        EXPECT_TRUE(torch::equal(loaded->get(name), t)) << name;
        EXPECT_EQ(loaded->get(name).scalar_type(), t.scalar_type()) << name;
      }
      torch::Tensor rng = loaded->get(cpu_rng_name(rank));
      if (rank < writers) {
        ASSERT_TRUE(rng.defined()) << "rank " << rank;
        EXPECT_TRUE(torch::equal(rng, torch::full({8}, rank, torch::kUInt8)));
      } else {
        EXPECT_FALSE(rng.defined()) << "rank " << rank << " did not exist in a world of " << writers;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Writers, SdkCheckpointerReshard, ::testing::Range(1, 9));

TEST(SdkUserState, TensorsAndBlobsRoundTripThroughACheckpoint) {
  const auto out = fresh_dir("userstate");
  torch::Tensor field = torch::arange(0, 100, torch::kFloat32).reshape({10, 10});
  torch::Tensor mine = torch::full({3}, 5, torch::kInt64);
  double time = 12.5;
  UserState user;
  user.add_tensor("field", field);
  user.add_tensor("halo", mine, UserState::Scope::kPerRank);
  user.add_blob(
      "time", [&] { return std::to_string(time); }, [&](const std::string& b) { time = std::stod(b); });
  EXPECT_THROW(user.add_tensor("field", field), ConfigError);
  EXPECT_THROW(user.add_tensor("../x", field), ConfigError);

  NamedTensors replicated, per_rank;
  user.capture(/*rank=*/0, replicated, per_rank);
  ASSERT_EQ(replicated.size(), 2u);
  ASSERT_EQ(per_rank.size(), 1u);
  EXPECT_EQ(per_rank[0].first, "user/rank0/halo");
  solo(out)->save(request(3, replicated, per_rank));

  field.zero_();
  mine.zero_();
  time = 0;
  auto loaded = solo(out)->load_latest([&](const std::string& n) { return user.wants(n, 0); });
  ASSERT_TRUE(loaded.has_value());
  user.restore(0, [&](const std::string& n) { return loaded->get(n); });
  EXPECT_TRUE(torch::equal(field, torch::arange(0, 100, torch::kFloat32).reshape({10, 10})));
  EXPECT_TRUE(torch::equal(mine, torch::full({3}, 5, torch::kInt64)));
  EXPECT_EQ(time, 12.5);
  // Rank 1 had no per-rank state in a world of 1: a clear error, not a silent zero.
  EXPECT_THROW(user.restore(1, [&](const std::string& n) { return loaded->get(n); }), StorageError);
}

}  // namespace
}  // namespace tenax::sdk
