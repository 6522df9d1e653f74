#include "tenax/sdk/checkpointer.h"

#include <filesystem>
#include <fstream>

#include <torch/torch.h>

#include <gtest/gtest.h>

#include "support/thread_ranks.h"
#include "tenax/core/error.h"

namespace tenax::sdk {
namespace {

std::filesystem::path fresh_dir(const std::string& name) {
  auto dir = std::filesystem::path(::testing::TempDir()) / ("tenax-sdk-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  return dir;
}

NamedTensors replicated_state(float scale) {
  return {{"model/a.weight", torch::arange(0, 300, torch::kFloat32).reshape({30, 10}) * scale},
          {"model/a.bias", torch::full({10}, scale)},
          {"model/big", torch::ones({1000}) * scale},
          {"optim/a.weight/step", torch::tensor(int64_t{7})}};
}

bool wants_all(const std::string&) { return true; }

TEST(SdkCheckpointer, TwoRanksSaveOneCheckpointThatEachRankLoads) {
  const auto out = fresh_dir("ckpt2");
  testing::run_ranks(2, [&](elastic::Communicator& comm) {
    Checkpointer ckpt(out, comm, /*generation=*/0);
    const NamedTensors per_rank{{"rng/rank" + std::to_string(comm.rank()) + "/cpu",
                                 torch::full({16}, comm.rank() + 1, torch::kUInt8)}};
    ckpt.save(10, 0, replicated_state(1.0f), per_rank, {{"global_step", 10}}, {{"seed", 1}});
  });
  const auto root = out / "checkpoints";
  EXPECT_TRUE(std::filesystem::exists(root / "step-000000010" / "manifest.json"));
  EXPECT_TRUE(std::filesystem::exists(root / "step-000000010" / "shard-00000-of-00002.h5"));
  EXPECT_TRUE(std::filesystem::exists(root / "step-000000010" / "shard-00001-of-00002.h5"));

  auto comm = testing::single_rank_communicator();
  Checkpointer reader(out, *comm, 0);
  auto loaded = reader.load_latest(wants_all);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->step, 10);
  EXPECT_EQ(loaded->world_size, 2);
  for (const auto& [name, t] : replicated_state(1.0f)) EXPECT_TRUE(torch::equal(loaded->get(name), t)) << name;
  EXPECT_TRUE(torch::equal(loaded->get("rng/rank1/cpu"), torch::full({16}, 2, torch::kUInt8)));
  EXPECT_EQ(loaded->trainer_state["global_step"], 10);
}

TEST(SdkCheckpointer, CorruptNewestFallsBackToPrevious) {
  const auto out = fresh_dir("fallback");
  auto comm = testing::single_rank_communicator();
  Checkpointer ckpt(out, *comm, 0);
  ckpt.save(5, 0, replicated_state(1.0f), {}, {}, {});
  ckpt.save(10, 0, replicated_state(2.0f), {}, {}, {});
  // Flip bytes in the middle of the newest shard (the tensor data dominates the file).
  const auto shard = out / "checkpoints" / "step-000000010" / "shard-00000-of-00001.h5";
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(std::filesystem::file_size(shard) / 2));
    const char junk[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    f.write(junk, sizeof junk);
  }
  auto loaded = ckpt.load_latest(wants_all);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->step, 5);
  EXPECT_TRUE(torch::equal(loaded->get("model/big"), torch::ones({1000})));
}

TEST(SdkCheckpointer, UncommittedDirectoryIsIgnored) {
  const auto out = fresh_dir("uncommitted");
  auto comm = testing::single_rank_communicator();
  Checkpointer ckpt(out, *comm, 0);
  EXPECT_FALSE(ckpt.load_latest(wants_all).has_value());
  ckpt.save(5, 0, replicated_state(1.0f), {}, {}, {});
  // A crash after writing shards but before the manifest leaves a .tmp directory behind.
  const auto tmp = out / "checkpoints" / ".tmp-step-000000009-g0";
  std::filesystem::create_directories(tmp);
  std::filesystem::copy_file(out / "checkpoints" / "step-000000005" / "shard-00000-of-00001.h5",
                             tmp / "shard-00000-of-00001.h5");
  auto loaded = ckpt.load_latest(wants_all);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->step, 5);
}

TEST(SdkCheckpointer, AFailedWriteCommitsNothingAndKeepsThePrevious) {
  const auto out = fresh_dir("readonly");
  auto comm = testing::single_rank_communicator();
  Checkpointer ckpt(out, *comm, 0);
  ckpt.save(5, 0, replicated_state(1.0f), {}, {}, {});
  // An unsupported dtype on the way in must fail cleanly before anything is committed.
  NamedTensors bad = replicated_state(2.0f);
  bad.emplace_back("model/weird", torch::zeros({2}, torch::kFloat64));
  EXPECT_THROW(ckpt.save(10, 0, bad, {}, {}, {}), StorageError);
  auto loaded = ckpt.load_latest(wants_all);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->step, 5);
}

}  // namespace
}  // namespace tenax::sdk
