#include "tenax/core/files.h"

#include <sys/stat.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "support/temp_dir.h"
#include "tenax/core/error.h"

namespace tenax {
namespace {

std::filesystem::path fresh_dir(const std::string& name) { return tenax::testing::fresh_dir("core", name); }

TEST(CoreFiles, AtomicWriteReplacesContentsAndLeavesNoTemporary) {
  auto dir = fresh_dir("atomic");
  files::atomic_write(dir / "latest", "step-000000010");
  EXPECT_EQ(files::read_all(dir / "latest"), "step-000000010");
  files::atomic_write(dir / "latest", "step-000000020");
  EXPECT_EQ(files::read_all(dir / "latest"), "step-000000020");
  int entries = 0;
  for (auto& e : std::filesystem::directory_iterator(dir)) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1);
}

TEST(CoreFiles, FailuresNameThePath) {
  auto dir = fresh_dir("fail");
  try {
    files::read_all(dir / "missing");
    FAIL();
  } catch (const StorageError& e) {
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos);
  }
  if (::geteuid() != 0) {  // root ignores directory permissions
    ::chmod(dir.c_str(), 0500);
    EXPECT_THROW(files::atomic_write(dir / "x", "y"), StorageError);
    ::chmod(dir.c_str(), 0700);
  }
  EXPECT_THROW(files::atomic_write(dir / "no-such-dir" / "x", "y"), StorageError);
  EXPECT_THROW(files::durable_rename(dir / "nope", dir / "other"), StorageError);
}

}  // namespace
}  // namespace tenax
