#include "tenax/storage/layout.h"

#include <gtest/gtest.h>

#include "tenax/core/error.h"

namespace tenax::storage {
namespace {

TEST(StorageLayout, Names) {
  EXPECT_EQ(step_dir_name(500), "step-000000500");
  EXPECT_EQ(step_dir_name(0), "step-000000000");
  EXPECT_EQ(step_dir_name(1234567890), "step-1234567890");
  EXPECT_EQ(tmp_dir_name(500, 3), ".tmp-step-000000500-g3");
  EXPECT_EQ(shard_file_name(0, 4), "shard-00000-of-00004.h5");
  EXPECT_EQ(shard_file_name(3, 4), "shard-00003-of-00004.h5");
  EXPECT_STREQ(kManifestFile, "manifest.json");
  EXPECT_STREQ(kLatestFile, "latest");
}

TEST(StorageLayout, ParsesOnlyCanonicalStepNames) {
  EXPECT_EQ(parse_step_dir_name("step-000000500"), 500);
  EXPECT_EQ(parse_step_dir_name("step-000000000"), 0);
  EXPECT_EQ(parse_step_dir_name("step-1234567890"), 1234567890);
  for (const char* bad : {"", "step-", "step-500", "step-00000050x", "step-0000000500", ".tmp-step-000000500-g3",
                          "Step-000000500", "step-000000500 ", "step--00000500", "step-99999999999999999999"}) {
    EXPECT_FALSE(parse_step_dir_name(bad).has_value()) << bad;
  }
}

TEST(StorageLayout, RejectsImpossibleArguments) {
  EXPECT_THROW(step_dir_name(-1), StorageError);
  EXPECT_THROW(shard_file_name(4, 4), StorageError);
  EXPECT_THROW(shard_file_name(-1, 4), StorageError);
}

}  // namespace
}  // namespace tenax::storage
