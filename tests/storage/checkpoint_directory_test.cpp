#include "tenax/storage/checkpoint_directory.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <optional>

#include "storage/storage_test_util.h"
#include "tenax/core/error.h"

namespace tenax::storage {
namespace {

namespace fs = std::filesystem;
using testing::pattern_tensor;

class StorageDirectory : public testing::TempDirTest {
 protected:
  // Writes one shard into a fresh tmp dir and returns (tmp, manifest) ready to commit.
  std::pair<fs::path, Manifest> stage(const CheckpointDirectory& dir, std::int64_t step, std::int64_t generation,
                                      std::uint32_t seed = 1) {
    const fs::path tmp = dir.prepare_tmp(step, generation);
    auto t = pattern_tensor("model/w", DType::kFloat32, {16}, seed);
    auto info = write_shard(tmp / shard_file_name(0, 1), {t.ref()});
    EXPECT_TRUE(info.is_ok()) << info.status().to_string();
    return {tmp, make_manifest(step, 0, generation, {info.value()})};
  }
};

TEST_F(StorageDirectory, EmptyOrMissingRootHasNothing) {
  CheckpointDirectory dir(dir_ / "does-not-exist");
  EXPECT_TRUE(dir.committed_steps().empty());
  EXPECT_FALSE(dir.latest_step().has_value());
  EXPECT_TRUE(dir.uncommitted_dirs().empty());
  EXPECT_EQ(dir.step_dir(7), dir_ / "does-not-exist" / "step-000000007");
}

TEST_F(StorageDirectory, CommitPublishesTheStep) {
  CheckpointDirectory dir(dir_ / "checkpoints");
  auto [tmp, manifest] = stage(dir, 500, 3);
  EXPECT_EQ(tmp, dir_ / "checkpoints" / ".tmp-step-000000500-g3");
  EXPECT_EQ(dir.uncommitted_dirs(), std::vector<fs::path>{tmp});
  EXPECT_TRUE(dir.committed_steps().empty());

  const Status s = dir.commit(tmp, manifest);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_FALSE(fs::exists(tmp));
  EXPECT_TRUE(fs::is_regular_file(dir.step_dir(500) / "manifest.json"));
  EXPECT_TRUE(fs::is_regular_file(dir.step_dir(500) / "shard-00000-of-00001.h5"));
  EXPECT_EQ(testing::read_file(dir.root() / "latest"), "step-000000500");
  EXPECT_EQ(dir.committed_steps(), std::vector<std::int64_t>{500});
  EXPECT_EQ(dir.latest_step(), 500);
  EXPECT_TRUE(dir.uncommitted_dirs().empty());
  // Nothing but the step dir and `latest` is left in the root.
  std::size_t entries = 0;
  for (const auto& e : fs::directory_iterator(dir.root())) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 2u);

  auto parsed = parse_manifest(testing::read_file(dir.step_dir(500) / "manifest.json"), "m");
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().to_string();
  EXPECT_EQ(parsed.value().generation, 3);
}

TEST_F(StorageDirectory, UncommittedDirsAreIgnoredAndRemovable) {
  CheckpointDirectory dir(dir_ / "checkpoints");
  auto [tmp, manifest] = stage(dir, 500, 0);
  ASSERT_TRUE(dir.commit(tmp, manifest).is_ok());
  const fs::path crashed_tmp = stage(dir, 600, 1).first;       // written, never committed
  const fs::path no_manifest = dir.root() / "step-000000700";  // renamed without a manifest?
  fs::create_directories(no_manifest);
  fs::create_directories(dir.root() / "unrelated");

  EXPECT_EQ(dir.committed_steps(), std::vector<std::int64_t>{500});
  EXPECT_EQ(dir.latest_step(), 500);
  const auto garbage = dir.uncommitted_dirs();
  EXPECT_EQ(garbage, (std::vector<fs::path>{crashed_tmp, no_manifest}));

  dir.remove_uncommitted();
  EXPECT_FALSE(fs::exists(crashed_tmp));
  EXPECT_FALSE(fs::exists(no_manifest));
  EXPECT_TRUE(fs::exists(dir.root() / "unrelated"));
  EXPECT_TRUE(fs::exists(dir.step_dir(500) / "manifest.json"));
}

TEST_F(StorageDirectory, LatestFallsBackToNewestCommitted) {
  CheckpointDirectory dir(dir_ / "checkpoints");
  for (std::int64_t step : {100, 200, 300}) {
    auto [tmp, manifest] = stage(dir, step, 0);
    ASSERT_TRUE(dir.commit(tmp, manifest).is_ok());
  }
  EXPECT_EQ(dir.committed_steps(), (std::vector<std::int64_t>{100, 200, 300}));
  EXPECT_EQ(dir.latest_step(), 300);
  files::atomic_write(dir.root() / "latest", "step-000000200\n");
  EXPECT_EQ(dir.latest_step(), 200);  // `latest` wins while it names a committed step
  files::atomic_write(dir.root() / "latest", "step-000000900");
  EXPECT_EQ(dir.latest_step(), 300);
  files::atomic_write(dir.root() / "latest", "garbage");
  EXPECT_EQ(dir.latest_step(), 300);
  fs::remove(dir.root() / "latest");
  EXPECT_EQ(dir.latest_step(), 300);
  fs::remove(dir.step_dir(300) / "manifest.json");
  EXPECT_EQ(dir.latest_step(), 200);
}

TEST_F(StorageDirectory, RecommitOfTheSameStepReplacesTheOldOne) {
  CheckpointDirectory dir(dir_ / "checkpoints");
  auto [tmp0, m0] = stage(dir, 500, 0, 1);
  ASSERT_TRUE(dir.commit(tmp0, m0).is_ok());
  auto [tmp1, m1] = stage(dir, 500, 1, 2);
  const Status s = dir.commit(tmp1, m1);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  auto parsed = parse_manifest(testing::read_file(dir.step_dir(500) / "manifest.json"), "m");
  ASSERT_TRUE(parsed.is_ok());
  EXPECT_EQ(parsed.value().generation, 1);
  EXPECT_EQ(parsed.value().shards[0].checksum, m1.shards[0].checksum);
  EXPECT_EQ(dir.committed_steps(), std::vector<std::int64_t>{500});
  EXPECT_TRUE(dir.uncommitted_dirs().empty());
}

// A re-save of a step sets the committed one aside before renaming its own in; a kill between
// the two renames must not cost the committed checkpoint (found by IntegrationAsyncSaveCrash's
// author: the recovery deleted both copies). Recovery puts the aside copy back.
TEST_F(StorageDirectory, ARecoveryRestoresACommittedStepSetAsideByACutOffResave) {
  CheckpointDirectory dir(dir_ / "checkpoints");
  auto [tmp1, manifest1] = stage(dir, 5, 1);
  ASSERT_TRUE(dir.commit(tmp1, manifest1).is_ok());
  auto [tmp2, manifest2] = stage(dir, 5, 2, 7);
  fs::rename(dir.step_dir(5), dir_ / "checkpoints" / ".old-step-000000005-g2");  // commit's step 2, then killed
  std::ofstream(dir_ / "checkpoints" / "latest.tmp.4242") << "step-0000";        // a killed atomic_write
  ASSERT_TRUE(dir.committed_steps().empty());

  dir.remove_uncommitted();
  EXPECT_EQ(dir.committed_steps(), std::vector<std::int64_t>{5});
  EXPECT_EQ(dir.latest_step(), std::optional<std::int64_t>(5));
  EXPECT_TRUE(dir.uncommitted_dirs().empty());
  EXPECT_FALSE(fs::exists(tmp2));
  EXPECT_FALSE(fs::exists(dir_ / "checkpoints" / "latest.tmp.4242"));
}

// transformers' save_total_limit: the newest `limit` survive with the best counted among them
// (moved to just before the newest), and a limit of 1 keeps 2 when the best is not the newest.
struct PruneCase {
  int limit;
  std::optional<std::int64_t> best;
  std::optional<std::int64_t> latest;  // `latest` naming an older step (a crash before it moved)
  std::vector<std::int64_t> kept;
};

TEST_F(StorageDirectory, PruneKeepsWhatTransformersKeeps) {
  const PruneCase cases[] = {
      {0, 20, std::nullopt, {10, 20, 30, 40, 50, 60}},  // 0 keeps everything
      {2, 20, std::nullopt, {20, 60}},                  // the best and the newest: 2 in all
      {3, 20, std::nullopt, {20, 50, 60}},
      {1, 20, std::nullopt, {20, 60}},  // 1 keeps 2, so that the newest can be resumed
      {2, 60, std::nullopt, {50, 60}},  // the best is the newest
      {2, 35, std::nullopt, {50, 60}},  // a best that is not committed protects nothing
      {1, std::nullopt, 50, {50, 60}},  // what `latest` names is never removed
      {6, 10, std::nullopt, {10, 20, 30, 40, 50, 60}},
  };
  int n = 0;
  for (const PruneCase& c : cases) {
    CheckpointDirectory dir(dir_ / ("case" + std::to_string(n++)) / "checkpoints");
    for (std::int64_t step : {10, 20, 30, 40, 50, 60}) {
      auto [tmp, manifest] = stage(dir, step, 0);
      ASSERT_TRUE(dir.commit(tmp, manifest).is_ok());
    }
    if (c.latest) files::atomic_write(dir.root() / "latest", step_dir_name(*c.latest));
    RetentionPolicy policy;
    policy.save_total_limit = c.limit;
    policy.best_step = c.best;
    std::vector<std::int64_t> expected_removed;
    for (std::int64_t step : {10, 20, 30, 40, 50, 60}) {
      if (std::find(c.kept.begin(), c.kept.end(), step) == c.kept.end()) expected_removed.push_back(step);
    }
    const std::string what =
        "limit " + std::to_string(c.limit) + ", best " + (c.best ? std::to_string(*c.best) : std::string("none"));
    EXPECT_EQ(dir.prune(policy), expected_removed) << what;
    EXPECT_EQ(dir.committed_steps(), c.kept) << what;
    EXPECT_TRUE(dir.uncommitted_dirs().empty()) << "pruned directories are deleted, not left aside";
  }
}

TEST_F(StorageDirectory, CommitRefusesMissingOrWrongShards) {
  CheckpointDirectory dir(dir_ / "checkpoints");
  auto [tmp, manifest] = stage(dir, 500, 0);
  Manifest wrong_size = manifest;
  wrong_size.shards[0].bytes += 1;
  Status s = dir.commit(tmp, wrong_size);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  fs::remove(tmp / shard_file_name(0, 1));
  s = dir.commit(tmp, manifest);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("shard-00000-of-00001.h5"), std::string::npos) << s.message();
  EXPECT_FALSE(fs::exists(dir.step_dir(500)));
  EXPECT_FALSE(fs::exists(dir.root() / "latest"));
  EXPECT_FALSE(dir.commit(dir_ / "nope", manifest).is_ok());
}

TEST_F(StorageDirectory, PrepareTmpClearsStaleContents) {
  CheckpointDirectory dir(dir_ / "checkpoints");
  const fs::path tmp = dir.prepare_tmp(5, 2);
  testing::write_file(tmp / "stale.h5", "old bytes");
  EXPECT_EQ(dir.prepare_tmp(5, 2), tmp);
  EXPECT_TRUE(fs::is_directory(tmp));
  EXPECT_FALSE(fs::exists(tmp / "stale.h5"));
}

}  // namespace
}  // namespace tenax::storage
