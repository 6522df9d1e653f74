// The job's CURVE key file: written once, private, checked on every read.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>

#include "tenax/core/error.h"
#include "tenax/elastic/job_keys.h"

namespace tenax::elastic {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

class ElasticJobKeys : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("tenax-keys-" + std::to_string(::getpid()) + "-" +
                                             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes `text` as a private key file and returns the ConfigError message of reading it.
  std::string read_error(const std::string& text, mode_t mode = 0600) {
    fs::create_directories(dir_);
    const fs::path file = dir_ / "keys";
    std::ofstream(file) << text;
    ::chmod(file.c_str(), mode);
    try {
      (void)read_job_keys(file);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  }

  static std::string lines(const JobKeys& k) {
    return "server_public " + k.server_public + "\nserver_secret " + k.server_secret + "\nclient_public " +
           k.client_public + "\nclient_secret " + k.client_secret + "\n";
  }

  fs::path dir_;
};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST_F(ElasticJobKeys, GeneratedKeysAreDistinctZ85Pairs) {
  const JobKeys a = JobKeys::generate();
  const JobKeys b = JobKeys::generate();
  EXPECT_EQ(a.server_public.size(), 40u);
  EXPECT_EQ(a.client_secret.size(), 40u);
  EXPECT_NE(a.server_public, a.client_public);
  EXPECT_NE(a, b);
}

TEST_F(ElasticJobKeys, WrittenFileIsPrivateAndReadsBackTheSameKeys) {
  const fs::path file = dir_ / "sub" / kJobKeysFileName;  // missing parents are created
  const JobKeys keys = JobKeys::generate();
  EXPECT_EQ(write_job_keys_if_absent(file, keys), keys);
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(read_job_keys(file), keys);
  EXPECT_EQ(std::distance(fs::directory_iterator(file.parent_path()), fs::directory_iterator()), 1)
      << "no temporary file is left behind";
}

TEST_F(ElasticJobKeys, ASecondWriterGetsTheKeysAlreadyThere) {
  const fs::path file = dir_ / kJobKeysFileName;
  const JobKeys first = create_or_read_job_keys(file);
  const JobKeys second = create_or_read_job_keys(file);
  EXPECT_EQ(second, first);
  EXPECT_EQ(write_job_keys_if_absent(file, JobKeys::generate()), first);
}

TEST_F(ElasticJobKeys, AFileOthersCanReadIsRefusedNamingModeAndFix) {
  const std::string message = read_error(lines(JobKeys::generate()), 0644);
  EXPECT_TRUE(contains(message, "mode 0644")) << message;
  EXPECT_TRUE(contains(message, "chmod 600")) << message;
}

TEST_F(ElasticJobKeys, MalformedFilesNameTheKeyOrLine) {
  const JobKeys k = JobKeys::generate();
  EXPECT_TRUE(contains(read_error("server_public " + k.server_public + "\n"), "has no 'server_secret'"));
  EXPECT_TRUE(contains(read_error(lines(k) + "colour blue\n"), "line 5"));
  EXPECT_TRUE(contains(read_error(lines(k) + "client_public " + k.client_public + "\n"), "appears twice"));
  JobKeys bad = k;
  bad.client_secret = "short";
  EXPECT_TRUE(contains(read_error(lines(bad)), "'client_secret' is not a 40-character Z85"));
  bad = k;
  bad.server_public = JobKeys::generate().server_public;  // valid key, but not this secret's
  EXPECT_TRUE(contains(read_error(lines(bad)), "'server_public' is not the public key of 'server_secret'"));
  EXPECT_EQ(read_error("# a comment\n\n" + lines(k)), "") << "comments and blank lines are fine";
}

TEST_F(ElasticJobKeys, MissingFileNamesTheFileAndTheFlag) {
  try {
    (void)read_job_keys(dir_ / "nowhere");
    FAIL() << "a missing file must be a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), (dir_ / "nowhere").string())) << e.what();
    EXPECT_TRUE(contains(e.what(), "--keys-file")) << e.what();
  }
}

TEST_F(ElasticJobKeys, WaitingReturnsTheKeysOnceTheHostingNodeWritesThem) {
  const fs::path file = dir_ / kJobKeysFileName;
  const JobKeys keys = JobKeys::generate();
  std::thread writer([&] {
    std::this_thread::sleep_for(milliseconds(300));
    write_job_keys_if_absent(file, keys);
  });
  const JobKeys seen = wait_for_job_keys(file, std::chrono::seconds(10));
  writer.join();
  EXPECT_EQ(seen, keys);
}

TEST_F(ElasticJobKeys, WaitingGivesUpNamingTheSharedFileSystem) {
  try {
    (void)wait_for_job_keys(dir_ / kJobKeysFileName, milliseconds(300));
    FAIL() << "a file that never appears must be a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "shared file system")) << e.what();
  }
}

}  // namespace
}  // namespace tenax::elastic
