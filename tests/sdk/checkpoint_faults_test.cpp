// Real I/O faults during a save: a file-size limit (EFBIG, RLIMIT_FSIZE), a full file system
// (ENOSPC, a small tmpfs) and a read-only file system (EROFS, tmpfs remounted read-only). Each
// save fails with a clear error, the previous checkpoint stays intact and loadable, and the
// Trainer continues or stops as TrainingArguments.on_save_error says.
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <cstdlib>
#include <filesystem>

#include <torch/torch.h>

#include <gtest/gtest.h>

#include "support/temp_dir.h"
#include "tenax/core/error.h"
#include "tenax/elastic/gloo_communicator.h"
#include "tenax/elastic/in_memory_store.h"
#include "tenax/sdk/checkpointer.h"
#include "tenax/sdk/trainer.h"
#include "tenax/storage/checkpoint_directory.h"
#include "tenax/storage/checkpoint_reader.h"

namespace tenax::sdk {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) { return tenax::testing::fresh_dir("faults", name); }

// Limits the size of any file this process writes; SIGXFSZ is ignored so write(2) fails with
// EFBIG instead of killing the process. Restored on destruction.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &old_);
    old_handler_ = ::signal(SIGXFSZ, SIG_IGN);
    set(bytes);
  }
  void set(rlim_t bytes) {
    rlimit lim = old_;
    lim.rlim_cur = bytes;
    EXPECT_EQ(::setrlimit(RLIMIT_FSIZE, &lim), 0);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    ::signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit old_{};
  sighandler_t old_handler_ = SIG_DFL;
};

// A tmpfs of `kib` KiB mounted at `dir` (root only); unmounted on destruction.
class SmallTmpfs {
 public:
  SmallTmpfs(const fs::path& dir, int kib) : dir_(dir) {
    const std::string options = "size=" + std::to_string(kib) + "k";
    mounted_ = ::mount("tmpfs", dir.c_str(), "tmpfs", 0, options.c_str()) == 0;
  }
  bool mounted() const { return mounted_; }
  bool remount_read_only() { return ::mount("tmpfs", dir_.c_str(), "tmpfs", MS_REMOUNT | MS_RDONLY, nullptr) == 0; }
  ~SmallTmpfs() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }

 private:
  fs::path dir_;
  bool mounted_ = false;
};

// A 4 MiB ext2 file system on a loop device (root only). ext2 has no fallocate(2), so a shard
// cannot reserve its space and the disk fills up in the middle of HDF5's writes.
class LoopExt2 {
 public:
  explicit LoopExt2(const fs::path& dir) : image_(dir.string() + ".img"), dir_(dir) {
    const std::string q = "'" + image_.string() + "'";
    mounted_ = std::system(("truncate -s 4M " + q + " && mkfs.ext2 -q -F " + q + " >/dev/null 2>&1 && mount -o loop " +
                            q + " '" + dir.string() + "'")
                               .c_str()) == 0;
  }
  bool mounted() const { return mounted_; }
  ~LoopExt2() {
    if (mounted_) std::system(("umount '" + dir_.string() + "'").c_str());
    fs::remove(image_);
  }

 private:
  fs::path image_, dir_;
  bool mounted_ = false;
};

std::uint64_t free_bytes(const fs::path& dir) {
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0) return 0;
  return static_cast<std::uint64_t>(st.f_bavail) * st.f_frsize;
}

std::unique_ptr<Checkpointer> solo(const fs::path& out) {
  return std::make_unique<Checkpointer>(out, 0, 1, 0, std::make_unique<elastic::InMemoryStore>());
}

SaveRequest request(std::int64_t step, std::int64_t floats) {
  SaveRequest r;
  r.step = step;
  r.replicated = {{"model/w", torch::full({floats}, static_cast<float>(step))}};
  return r;
}

bool everything_committed_verifies(const fs::path& out) {
  storage::CheckpointDirectory dir(out / "checkpoints");
  for (auto step : dir.committed_steps()) {
    auto reader = storage::CheckpointReader::open(dir.step_dir(step));
    if (!reader.is_ok() || !reader.value().verify_all().is_ok()) return false;
  }
  return true;
}

std::int64_t loaded_step(Checkpointer& ckpt) {
  auto loaded = ckpt.load_latest([](const std::string&) { return true; });
  return loaded ? loaded->step : -1;
}

// Saves checkpoints of `floats` float32 until one fails (at most 40).
struct Filled {
  std::string error;         ///< the failed save's message ("" if none failed)
  std::int64_t last_ok = 0;  ///< the last step that committed
  std::uint64_t free_before_failure = 0;
};
Filled fill_until_failure(Checkpointer& ckpt, const fs::path& out, std::int64_t floats) {
  Filled f;
  for (std::int64_t step = 1; step <= 40 && f.error.empty(); ++step) {
    f.free_before_failure = free_bytes(out);
    try {
      ckpt.save(request(step, floats));
      f.last_ok = step;
    } catch (const StorageError& e) {
      f.error = e.what();
    }
  }
  return f;
}

TEST(SdkCheckpointFaults, FileSizeLimitFailsTheSaveAndKeepsThePrevious) {
  const auto out = fresh_dir("efbig");
  auto ckpt = solo(out);
  FileSizeLimit limit(256 * 1024);
  ckpt->save(request(1, 1000));  // 4 KB: fits
  try {
    ckpt->save(request(2, 200000));  // 800 KB: over the limit
    ADD_FAILURE() << "a save over the file-size limit must fail";
  } catch (const StorageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("not committed"), std::string::npos) << what;
    EXPECT_NE(what.find("shard-00000-of-00001.h5"), std::string::npos) << "names the file: " << what;
  }
  EXPECT_EQ(loaded_step(*ckpt), 1);
  EXPECT_TRUE(everything_committed_verifies(out));
  EXPECT_TRUE(storage::CheckpointDirectory(out / "checkpoints").uncommitted_dirs().empty());
}

TEST(SdkCheckpointFaults, FullFileSystemFailsClearlyAndKeepsEveryCommittedCheckpoint) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a small tmpfs needs root (CI runs as root)";
  const auto out = fresh_dir("enospc");
  SmallTmpfs fs_(out, 512);
  ASSERT_TRUE(fs_.mounted()) << "mount tmpfs at " << out << ": " << std::strerror(errno);
  auto ckpt = solo(out);
  const auto [error, last_ok, free_before] = fill_until_failure(*ckpt, out, 25000);  // 100 KB each
  ASSERT_FALSE(error.empty()) << "the file system never filled up";
  EXPECT_GE(last_ok, 1);
  EXPECT_NE(error.find("No space left on device"), std::string::npos) << error;
  EXPECT_EQ(loaded_step(*ckpt), last_ok);
  EXPECT_TRUE(everything_committed_verifies(out));
  EXPECT_TRUE(storage::CheckpointDirectory(out / "checkpoints").uncommitted_dirs().empty())
      << "the failed save's partial files are removed (space is given back)";
}

TEST(SdkCheckpointFaults, ReadOnlyFileSystemFailsClearlyAndKeepsThePrevious) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a tmpfs needs root (CI runs as root)";
  const auto out = fresh_dir("erofs");
  SmallTmpfs fs_(out, 4096);
  ASSERT_TRUE(fs_.mounted()) << std::strerror(errno);
  {
    auto ckpt = solo(out);
    ckpt->save(request(1, 1000));
  }
  ASSERT_TRUE(fs_.remount_read_only()) << std::strerror(errno);
  auto ckpt = solo(out);  // also: removing leftovers on a read-only fs must not throw
  try {
    ckpt->save(request(2, 1000));
    ADD_FAILURE() << "a save on a read-only file system must fail";
  } catch (const StorageError& e) {
    EXPECT_NE(std::string(e.what()).find("Read-only file system"), std::string::npos) << e.what();
  }
  EXPECT_EQ(loaded_step(*ckpt), 1);
  EXPECT_TRUE(everything_committed_verifies(out));
}

TEST(SdkCheckpointFaults, DiskFullInTheMiddleOfHdf5WritesLeavesNoStateAndGivesTheSpaceBack) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a loop device needs root (CI runs as root)";
  const auto out = fresh_dir("ext2");
  LoopExt2 disk(out);
  ASSERT_TRUE(disk.mounted()) << "truncate + mkfs.ext2 + mount -o loop at " << out;
  auto ckpt = solo(out);
  const auto [error, last_ok, free_before_failure] = fill_until_failure(*ckpt, out, 100000);  // 400 KB each
  ASSERT_FALSE(error.empty()) << "the file system never filled up";
  EXPECT_GE(last_ok, 1);
  EXPECT_NE(error.find("No space left on device"), std::string::npos) << error;
  EXPECT_EQ(loaded_step(*ckpt), last_ok);
  EXPECT_TRUE(everything_committed_verifies(out));
  EXPECT_TRUE(storage::CheckpointDirectory(out / "checkpoints").uncommitted_dirs().empty());
  // No descriptor pins the removed partial shard: its blocks are free again.
  EXPECT_GE(free_bytes(out) + 64 * 1024, free_before_failure);
  // (ctest runs this test in its own process: a half-closed HDF5 file would crash it at exit.)
}

// --- The Trainer's on_save_error policy, with the file-size limit lowered mid-run. ---

class Points final : public Dataset {
 public:
  std::int64_t size() const override { return 64; }
  Example get(std::int64_t i) const override {
    auto x = torch::full({8}, static_cast<float>(i) / 64.0f);
    return {x, x.sum().unsqueeze(0)};
  }
};

class Wide final : public Model {
 public:
  Wide()
      : fc_(register_module("fc", torch::nn::Linear(8, 4096))),
        out_(register_module("out", torch::nn::Linear(4096, 1))) {}
  ModelOutput forward(const Batch& batch) override {
    ModelOutput o;
    o.logits = out_(torch::relu(fc_(batch.inputs)));
    o.loss = torch::mse_loss(o.logits, batch.labels);
    return o;
  }

 private:
  torch::nn::Linear fc_, out_;
};

// Records save errors and how far training got.
class Watch final : public TrainerCallback {
 public:
  void on_step_end(const TrainingArguments&, TrainerState& s, TrainerControl&) override { last_step = s.global_step; }
  void on_save_error(const TrainingArguments&, TrainerState& s, TrainerControl&, const std::string& e) override {
    errors.push_back(e);
    error_steps.push_back(s.global_step);
  }
  std::vector<std::string> errors;
  std::vector<std::int64_t> error_steps;
  std::int64_t last_step = 0;
};

struct PolicyRun {
  bool threw_storage_error = false;
  std::shared_ptr<Watch> watch;
};

// Under a fixed 1 MiB file-size limit, the save of step 10 fits; from step 12 on, a user-state
// blob of 2 MiB makes every later shard too large (no timing involved: the size decides).
PolicyRun run_with_policy(const fs::path& out, const std::string& policy, bool async) {
  PolicyRun run;
  FileSizeLimit limit(1024 * 1024);
  run.watch = std::make_shared<Watch>();
  elastic::WorkerContext ctx(elastic::WorkerIdentity{}, nullptr, elastic::make_local_communicator());
  TrainingArguments args;
  args.output_dir = out.string();
  args.max_steps = 30;
  args.save_steps = 10;
  args.logging_steps = 10;
  args.per_device_train_batch_size = 4;
  args.on_save_error = policy;
  args.save_async = async;
  auto watch = run.watch;
  UserState user;
  user.add_blob(
      "grows", [watch] { return std::string(watch->last_step >= 12 ? 2u << 20 : 16u, 'x'); },
      [](const std::string&) {});
  Trainer trainer(std::make_shared<Wide>(), args, std::make_shared<Points>(), ctx);
  trainer.add_callback(run.watch);
  trainer.set_user_state(user);
  try {
    trainer.train();
  } catch (const StorageError&) {
    run.threw_storage_error = true;
  }
  return run;
}

TEST(SdkCheckpointFaults, ContinuePolicyKeepsTrainingButTheFinalSaveMustCommit) {
  const auto out = fresh_dir("continue");
  PolicyRun run = run_with_policy(out, "continue", /*async=*/true);
  EXPECT_EQ(run.watch->last_step, 30) << "training went on past the failed save of step 20";
  ASSERT_EQ(run.watch->error_steps, (std::vector<std::int64_t>{30, 30}))
      << "step 20's failure is known at the step-30 save point, step 30's at the end";
  EXPECT_TRUE(run.threw_storage_error) << "a final checkpoint that did not commit is an error";
  EXPECT_EQ(loaded_step(*solo(out)), 10);
  EXPECT_TRUE(everything_committed_verifies(out));
}

TEST(SdkCheckpointFaults, StopPolicyStopsAtTheSavePointThatLearnsOfTheFailure) {
  const auto out = fresh_dir("stop");
  PolicyRun run = run_with_policy(out, "stop", /*async=*/false);
  EXPECT_TRUE(run.threw_storage_error);
  EXPECT_EQ(run.watch->last_step, 20) << "a synchronous save fails at step 20 itself";
  EXPECT_EQ(run.watch->error_steps, std::vector<std::int64_t>{20});
  EXPECT_EQ(loaded_step(*solo(out)), 10);
}

}  // namespace
}  // namespace tenax::sdk
