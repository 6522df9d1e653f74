#include "run_options.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tenax/core/error.h"

namespace tenax::launcher {
namespace {

using Args = std::vector<std::string>;

// The ConfigError message of parse_run_options(args); fails the test when nothing is thrown.
std::string usage_error_of(const Args& args) {
  try {
    parse_run_options(args);
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ConfigError was thrown";
  return "";
}

TEST(LauncherRunOptions, ParsesAllFlags) {
  RunOptions o =
      parse_run_options(Args{"--nproc-per-node", "4", "--max-restarts", "2", "--run-dir", "/tmp/r",
                             "--grace-period", "1", "--preempt-grace", "30", "--", "./app", "--config", "run.toml"});
  EXPECT_EQ(o.preempt_grace, std::chrono::seconds(30));
  EXPECT_EQ(o.nproc_per_node, 4);
  EXPECT_EQ(o.max_restarts, 2);
  EXPECT_EQ(o.run_dir, "/tmp/r");
  EXPECT_EQ(o.grace_period, std::chrono::seconds(1));
  EXPECT_EQ(o.command, (Args{"./app", "--config", "run.toml"}));
}

TEST(LauncherRunOptions, KeysFileDefaultsToTheRunDirectoryOrTheDirectoryTheNodesShare) {
  EXPECT_EQ(job_keys_path(parse_run_options(Args{"--nproc-per-node", "1", "--", "app"})),
            std::filesystem::path(kDefaultRunDir) / "tenax-job.keys");
  EXPECT_EQ(job_keys_path(parse_run_options(Args{"--nproc-per-node", "1", "--run-dir", "/out/run", "--", "app"})),
            "/out/run/tenax-job.keys");
  // One run directory per node: the keys go where every node sees them.
  EXPECT_EQ(job_keys_path(parse_run_options(Args{"--nproc-per-node", "1", "--run-dir", "/out/run-%n/x", "--", "app"})),
            "/out/tenax-job.keys");
  EXPECT_EQ(job_keys_path(parse_run_options(Args{"--nproc-per-node", "1", "--run-dir", "%n", "--", "app"})),
            "tenax-job.keys");
  const RunOptions o = parse_run_options(Args{"--nproc-per-node", "1", "--keys-file", "/shared/k", "--", "app"});
  EXPECT_EQ(o.keys_file, "/shared/k");
  EXPECT_EQ(job_keys_path(o), "/shared/k");
  EXPECT_THROW(parse_run_options(Args{"--nproc-per-node", "1", "--keys-file=", "--", "app"}), ConfigError);
}

TEST(LauncherRunOptions, AcceptsEqualsFormAndDefaults) {
  RunOptions o = parse_run_options(Args{"--nproc-per-node=2", "--", "app"});
  EXPECT_EQ(o.nproc_per_node, 2);
  EXPECT_EQ(o.max_restarts, kDefaultMaxRestarts);
  EXPECT_EQ(o.run_dir, kDefaultRunDir);
  EXPECT_EQ(o.grace_period, kDefaultGracePeriod);
  EXPECT_EQ(o.preempt_grace, kDefaultPreemptGrace);
  EXPECT_EQ(o.command, Args{"app"});
}

TEST(LauncherRunOptions, FlagsAfterDoubleDashBelongToTheProgram) {
  RunOptions o = parse_run_options(
      Args{"--nproc-per-node", "1", "--", "app", "--max-restarts", "x", "--", "--help"});
  EXPECT_EQ(o.command, (Args{"app", "--max-restarts", "x", "--", "--help"}));
  EXPECT_EQ(o.max_restarts, kDefaultMaxRestarts);
}

TEST(LauncherRunOptions, ArgcArgvSkipsTheSubcommand) {
  const char* argv[] = {"run", "--nproc-per-node", "3", "--", "app", "a"};
  RunOptions o = parse_run_options(6, argv);
  EXPECT_EQ(o.nproc_per_node, 3);
  EXPECT_EQ(o.command, (Args{"app", "a"}));
}

TEST(LauncherRunOptions, MissingDoubleDashIsNamed) {
  EXPECT_NE(usage_error_of({"--nproc-per-node", "2"}).find("missing `--`"), std::string::npos);
}

TEST(LauncherRunOptions, ProgramBeforeDoubleDashIsRejected) {
  const std::string m = usage_error_of({"--nproc-per-node", "2", "./app"});
  EXPECT_NE(m.find("'./app'"), std::string::npos) << m;
  EXPECT_NE(m.find("after `--`"), std::string::npos) << m;
}

TEST(LauncherRunOptions, MissingProgramIsNamed) {
  const std::string m = usage_error_of({"--nproc-per-node", "2", "--"});
  EXPECT_NE(m.find("no program after `--`"), std::string::npos) << m;
}

TEST(LauncherRunOptions, MissingNprocIsNamed) {
  const std::string m = usage_error_of({"--", "app"});
  EXPECT_NE(m.find("--nproc-per-node"), std::string::npos) << m;
}

TEST(LauncherRunOptions, NprocBelowOneIsNamed) {
  for (const char* bad : {"0", "-1"}) {
    const std::string m = usage_error_of({"--nproc-per-node", bad, "--", "app"});
    EXPECT_NE(m.find("--nproc-per-node must be at least 1"), std::string::npos) << m;
  }
}

TEST(LauncherRunOptions, NonIntegerValuesAreNamed) {
  struct Case {
    const char* flag;
    const char* value;
  };
  for (Case c :
       {Case{"--nproc-per-node", "two"}, Case{"--nproc-per-node", "2.5"},
        Case{"--max-restarts", "3x"}, Case{"--grace-period", "0.5"}, Case{"--grace-period", ""}}) {
    const std::string m = usage_error_of({c.flag, c.value, "--nproc-per-node", "1", "--", "a"});
    EXPECT_NE(m.find(std::string(c.flag) + " expects"), std::string::npos) << m;
    EXPECT_NE(m.find("'" + std::string(c.value) + "'"), std::string::npos) << m;
  }
}

TEST(LauncherRunOptions, NegativeRestartsAndGraceAreNamed) {
  EXPECT_NE(usage_error_of({"--nproc-per-node", "1", "--max-restarts", "-1", "--", "a"})
                .find("--max-restarts must be at least 0"),
            std::string::npos);
  EXPECT_NE(usage_error_of({"--nproc-per-node", "1", "--grace-period", "-2", "--", "a"})
                .find("--grace-period must be at least 0"),
            std::string::npos);
}

TEST(LauncherRunOptions, UnknownFlagIsNamed) {
  std::string m = usage_error_of({"--nproc-per-node", "1", "--nodes", "2", "--", "a"});
  EXPECT_NE(m.find("unknown flag --nodes"), std::string::npos) << m;
  m = usage_error_of({"-n", "2", "--", "a"});
  EXPECT_NE(m.find("unknown flag -n"), std::string::npos) << m;
}

TEST(LauncherRunOptions, FlagWithoutValueIsNamed) {
  std::string m = usage_error_of({"--nproc-per-node", "--", "a"});
  EXPECT_NE(m.find("--nproc-per-node needs a value"), std::string::npos) << m;
  m = usage_error_of({"--nproc-per-node", "1", "--run-dir"});
  EXPECT_NE(m.find("--run-dir needs a value"), std::string::npos) << m;
}

TEST(LauncherRunOptions, HelpIsOnlyRecognisedBeforeDoubleDash) {
  EXPECT_TRUE(run_help_requested({"--help"}));
  EXPECT_TRUE(run_help_requested({"--nproc-per-node", "2", "-h", "--", "a"}));
  EXPECT_FALSE(run_help_requested({"--nproc-per-node", "2", "--", "a", "--help"}));
  EXPECT_NE(run_usage().find("--nproc-per-node"), std::string::npos);
}

TEST(LauncherRunOptions, FindProgramSearchesPathAndChecksFiles) {
  EXPECT_EQ(find_program("/bin/sh"), "/bin/sh");
  EXPECT_FALSE(find_program("sh").empty());
  try {
    find_program("tenax-no-such-program-xyz");
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("not found in PATH"), std::string::npos) << e.what();
  }
  try {
    find_program("/no/such/dir/app");
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("not found"), std::string::npos) << e.what();
  }
  const std::string data = ::testing::TempDir() + "/launcher_not_executable.txt";
  std::ofstream(data) << "data\n";
  std::filesystem::permissions(
      data, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  try {
    find_program(data);  // exists, not executable
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("not an executable"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tenax::launcher
