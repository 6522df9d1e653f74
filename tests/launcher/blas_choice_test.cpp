// Which OpenBLAS kernels `tenax run` gives its workers (launcher/src/blas_choice.h): the pure
// decision by table, then the real binary: the variable reaches the workers, a user's choice
// stands and a slow one is warned about.
#include "blas_choice.h"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include <gtest/gtest.h>

namespace tenax::launcher {
namespace {

constexpr CpuVectorFeatures kNoAvx2{false, false};
constexpr CpuVectorFeatures kAvx2{true, false};
constexpr CpuVectorFeatures kAvx512{true, true};

OpenBlasInfo openblas(const std::string& core) {
  OpenBlasInfo info;
  info.core = core;
  info.config = "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY USE_OPENMP " + core + " MAX_THREADS=64";
  info.threads = 2;
  info.threading = "OpenMP";
  return info;
}

bool says(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

struct Row {
  std::optional<OpenBlasInfo> probed;
  CpuVectorFeatures cpu;
  std::string user_coretype;
  std::optional<std::string> coretype;  // what the workers get
  bool warn;
  std::string message_part;
};

TEST(BlasChoice, ByTable) {
  const Row rows[] = {
      // Not OpenBLAS: nothing to choose, and the log says so.
      {std::nullopt, kAvx512, "", std::nullopt, false, "is not OpenBLAS"},
      // OpenBLAS's own choice is right: left alone.
      {openblas("Cooperlake"), kAvx512, "", std::nullopt, false, "core Cooperlake; CPU AVX-512"},
      {openblas("Haswell"), kAvx2, "", std::nullopt, false, "core Haswell; CPU AVX2"},
      {openblas("Prescott"), kNoAvx2, "", std::nullopt, false, "core Prescott; CPU no AVX2"},
      // A fallback on a CPU that has better: corrected, and said.
      {openblas("Prescott"), kAvx512, "", "SkylakeX", false,
       "does not know this CPU (AVX-512) and falls back to its Prescott kernels; the workers get "
       "OPENBLAS_CORETYPE=SkylakeX"},
      {openblas("Sandybridge"), kAvx2, "", "Haswell", false, "the workers get OPENBLAS_CORETYPE=Haswell"},
      // The user's OPENBLAS_CORETYPE stands; a slow one is warned about with the fix.
      {openblas("SkylakeX"), kAvx512, "SkylakeX", std::nullopt, false, "OPENBLAS_CORETYPE=SkylakeX (yours)"},
      {openblas("Prescott"), kAvx512, "Prescott", std::nullopt, true,
       "slower kernels than this CPU can run; unset OPENBLAS_CORETYPE (tenax run then chooses) or set "
       "OPENBLAS_CORETYPE=SkylakeX"},
      {openblas("Prescott"), kAvx2, "prescott", std::nullopt, true, "or set OPENBLAS_CORETYPE=Haswell"},
  };
  for (const Row& row : rows) {
    const BlasChoice choice = choose_worker_blas(row.probed, row.cpu, row.user_coretype);
    const std::string where = (row.probed ? row.probed->core : std::string("no OpenBLAS")) + " on " +
                              describe(row.cpu) + ", user '" + row.user_coretype + "'";
    EXPECT_EQ(choice.coretype, row.coretype) << where;
    EXPECT_EQ(choice.warn, row.warn) << where;
    EXPECT_TRUE(says(choice.message, row.message_part)) << where << ": " << choice.message;
  }
}

// The real binary: a /bin/sh worker prints the OPENBLAS_CORETYPE it was given.
std::string run_worker_printing_coretype(const std::string& env_prefix) {
  const std::string cmd = env_prefix + " timeout -k 10 120 " + std::string(TENAX_BINARY) +
                          " run --nproc-per-node 1 --run-dir " + ::testing::TempDir() + "/blas-choice-" +
                          std::to_string(::getpid()) +
                          " -- /bin/sh -c 'echo \"worker got OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE-unset}\"' 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(cmd.c_str(), "r"), ::pclose);
  std::string out;
  char buffer[4096];
  while (pipe && std::fgets(buffer, sizeof buffer, pipe.get())) out += buffer;
  return out;
}

TEST(BlasChoice, TenaxRunGivesItsWorkersTheDecisionForThisMachine) {
  // What the agent will find: the same probe, under the same environment (no OPENBLAS_CORETYPE,
  // as the agent below gets none; this process has loaded no OpenBLAS before this probe).
  ::unsetenv("OPENBLAS_CORETYPE");
  const BlasChoice expected = choose_worker_blas_here();
  const std::string out = run_worker_printing_coretype("env -u OPENBLAS_CORETYPE");
  EXPECT_TRUE(says(out, "worker got OPENBLAS_CORETYPE=" + expected.coretype.value_or("unset"))) << out;
  EXPECT_TRUE(says(out, expected.message)) << out;
}

TEST(BlasChoice, AUsersSlowChoiceReachesTheWorkersWithAWarning) {
  // Prescott's kernels are slower than any CPU with AVX2 runs; on one without, they are not,
  // and there is nothing to warn about.
  const bool slower = better_openblas_core("Prescott", detect_cpu_vector_features()).has_value();
  const std::string out = run_worker_printing_coretype("env OPENBLAS_CORETYPE=Prescott");
  EXPECT_TRUE(says(out, "worker got OPENBLAS_CORETYPE=Prescott")) << out;
  EXPECT_EQ(says(out, "warning: BLAS: OpenBLAS"), slower) << out;
  EXPECT_EQ(says(out, "slower kernels than this CPU can run"), slower) << out;
}

}  // namespace
}  // namespace tenax::launcher
