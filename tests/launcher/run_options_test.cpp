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
      parse_run_options(Args{"--nproc-per-node", "4", "--max-restarts", "2", "--run-dir", "/tmp/r", "--grace-period",
                             "1", "--preempt-grace", "30", "--", "./app", "--config", "run.toml"});
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
  RunOptions o = parse_run_options(Args{"--nproc-per-node", "1", "--", "app", "--max-restarts", "x", "--", "--help"});
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
  for (Case c : {Case{"--nproc-per-node", "two"}, Case{"--nproc-per-node", "2.5"}, Case{"--max-restarts", "3x"},
                 Case{"--grace-period", "0.5"}, Case{"--grace-period", ""}}) {
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

TEST(LauncherRunOptions, AcceptsTorchrunSpellings) {
  const RunOptions o = parse_run_options(Args{"--nproc_per_node=4", "--nnodes", "1:2", "--max_restarts", "5",
                                              "--rdzv_endpoint=node01:29400", "--rdzv_id", "job-9",
                                              "--monitor_interval", "0.02", "--", "./app"});
  EXPECT_EQ(o.nproc_per_node, 4);
  EXPECT_EQ(o.nnodes, (NodeRange{1, 2}));
  EXPECT_EQ(o.max_restarts, 5);
  EXPECT_EQ(o.rdzv_endpoint, "node01:29400");
  EXPECT_EQ(o.rdzv_id, "job-9");
  EXPECT_EQ(o.monitor_interval, std::chrono::milliseconds(20));
  EXPECT_EQ(o.command, Args{"./app"});
  // Both spellings parse into the same options.
  EXPECT_EQ(o, parse_run_options(Args{"--nproc-per-node", "4", "--nnodes=1:2", "--max-restarts=5", "--rdzv-endpoint",
                                      "node01:29400", "--rdzv-id=job-9", "--monitor-interval=0.02", "--", "./app"}));
  EXPECT_EQ(parse_run_options(Args{"--nproc-per-node", "1", "--", "a"}).monitor_interval, kDefaultMonitorInterval);
}

TEST(LauncherRunOptions, TorchrunProgramFormsRunPython) {
  // A script: python3 -u, as torchrun runs it (its flags after the script are the script's).
  EXPECT_EQ(parse_run_options(Args{"--nproc_per_node", "2", "train.py", "--lr", "0.1", "--"}).command,
            (Args{"python3", "-u", "train.py", "--lr", "0.1", "--"}));
  // -m / --module: the first argument is a module, before or after the other flags.
  EXPECT_EQ(parse_run_options(Args{"-m", "--nproc_per_node", "2", "pkg.train", "--epochs", "1"}).command,
            (Args{"python3", "-u", "-m", "pkg.train", "--epochs", "1"}));
  EXPECT_EQ(parse_run_options(Args{"--nproc-per-node", "2", "--module", "pkg.train"}).command,
            (Args{"python3", "-u", "-m", "pkg.train"}));
  EXPECT_EQ(parse_run_options(Args{"--nproc-per-node", "2", "-m", "--", "pkg.train", "x"}).command,
            (Args{"python3", "-u", "-m", "pkg.train", "x"}));
  // --no-python: the program itself; after `--`, a .py runs as it is (Tenax's form).
  EXPECT_EQ(parse_run_options(Args{"--nproc-per-node", "2", "--no_python", "./app", "-x"}).command,
            (Args{"./app", "-x"}));
  EXPECT_EQ(parse_run_options(Args{"--nproc-per-node", "2", "--", "./run.py"}).command, Args{"./run.py"});
  EXPECT_NE(usage_error_of({"--nproc-per-node", "2", "-m"}).find("-m needs a module"), std::string::npos);
  EXPECT_NE(usage_error_of({"--nproc-per-node", "2", "-m", "--no-python", "x"}).find("exclude each other"),
            std::string::npos);
  EXPECT_NE(usage_error_of({"--nproc-per-node", "2", "--standalone=1", "a.py"}).find("--standalone takes no value"),
            std::string::npos);
}

TEST(LauncherRunOptions, StandaloneIsOneNodeWithItsOwnRendezvous) {
  RunOptions o = parse_run_options(Args{"--standalone", "--nnodes", "1", "--nproc_per_node", "2", "a.py"});
  EXPECT_TRUE(o.standalone);
  EXPECT_FALSE(o.nnodes.has_value());  // --nnodes 1 with --standalone: the single-node agent
  std::string m = usage_error_of({"--standalone", "--nnodes", "2", "--nproc_per_node", "2", "a.py"});
  EXPECT_NE(m.find("--standalone runs one node"), std::string::npos) << m;
  m = usage_error_of({"--standalone", "--rdzv_endpoint", "h:1", "--nproc_per_node", "2", "a.py"});
  EXPECT_NE(m.find("drop --rdzv-endpoint h:1"), std::string::npos) << m;
}

TEST(LauncherRunOptions, TorchrunFlagsWithoutAnEquivalentAreNamed) {
  for (const char* flag :
       {"--rdzv_backend", "--rdzv-backend", "--rdzv_conf", "--master_addr", "--master_port", "--node_rank", "--role",
        "--log_dir", "--redirects", "--tee", "--start_method", "--local_addr", "-r", "-t"}) {
    const std::string m = usage_error_of({"--nproc_per_node", "2", flag, "x", "train.py"});
    EXPECT_NE(m.find("torchrun's flag " + std::string(flag) + " is not one of tenax run's: "), std::string::npos) << m;
  }
  std::string m = usage_error_of({"--nproc_per_node", "2", "--max_restart", "3", "train.py"});
  EXPECT_NE(m.find("unknown flag --max_restart;"), std::string::npos) << m;
  m = usage_error_of({"--nproc_per_node", "auto", "train.py"});
  EXPECT_NE(m.find("--nproc_per_node expects a whole number of workers, got 'auto'"), std::string::npos) << m;
  for (const char* bad : {"0", "-1", "x", "0.0001", ""}) {
    m = usage_error_of({"--nproc-per-node", "1", "--monitor-interval", bad, "--", "a"});
    EXPECT_NE(m.find("--monitor-interval expects seconds"), std::string::npos) << bad << ": " << m;
  }
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
  // torchrun's forms: a script's or module's --help is its own.
  EXPECT_FALSE(run_help_requested({"--nproc_per_node", "2", "train.py", "--help"}));
  EXPECT_FALSE(run_help_requested({"-m", "--nproc_per_node=2", "pkg.train", "-h"}));
  EXPECT_TRUE(run_help_requested({"--nproc_per_node", "2", "--standalone", "--help", "train.py"}));
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
  std::filesystem::permissions(data, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  try {
    find_program(data);  // exists, not executable
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("not an executable"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tenax::launcher
