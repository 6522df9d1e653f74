// The BLAS kernel decision (tenax/core/blas_kernels.h): which OpenBLAS cores count as a
// fallback on which CPU, by table; and what this machine's OpenBLAS says of itself.
#include "tenax/core/blas_kernels.h"

#include <optional>
#include <string>

#include <gtest/gtest.h>

namespace tenax {
namespace {

constexpr CpuVectorFeatures kNoAvx2{false, false};
constexpr CpuVectorFeatures kAvx2{true, false};
constexpr CpuVectorFeatures kAvx512{true, true};

struct Row {
  const char* core;
  CpuVectorFeatures cpu;
  std::optional<std::string> better;
};

TEST(BlasKernels, OnlyAPreAvx2FallbackOnAVectorCpuIsCorrected) {
  const Row rows[] = {
      // Debian 12's OpenBLAS 0.3.21 on a 2023 Xeon: SSE3 kernels on an AVX-512 CPU.
      {"Prescott", kAvx512, "SkylakeX"},
      {"Prescott", kAvx2, "Haswell"},
      {"Prescott", kNoAvx2, std::nullopt},  // nothing better to run
      {"Nehalem", kAvx512, "SkylakeX"},
      {"Sandybridge", kAvx2, "Haswell"},  // AVX without FMA: half Haswell's GEMM rate
      {"Core2", kAvx2, "Haswell"},
      {"Barcelona", kAvx2, "Haswell"},  // an unknown AMD falls back to this
      // OpenBLAS's own choice with vector kernels stands, whatever the CPU adds on top.
      {"Haswell", kAvx512, std::nullopt},
      {"Zen", kAvx512, std::nullopt},
      {"SkylakeX", kAvx512, std::nullopt},
      {"Cooperlake", kAvx512, std::nullopt},
      {"SapphireRapids", kAvx512, std::nullopt},
      {"Haswell", kAvx2, std::nullopt},
      // Case differs between OpenBLAS versions and what users type.
      {"PRESCOTT", kAvx512, "SkylakeX"},
      {"skylakex", kAvx512, std::nullopt},
      {"", kAvx512, std::nullopt},  // no name: nothing to decide on
  };
  for (const Row& row : rows) {
    EXPECT_EQ(better_openblas_core(row.core, row.cpu), row.better) << row.core << " on " << describe(row.cpu);
  }
}

TEST(BlasKernels, DescribesTheLibraryFromItsConfigString) {
  OpenBlasInfo info;
  info.core = "Cooperlake";
  info.config = "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY USE_OPENMP Cooperlake MAX_THREADS=64";
  info.threads = 1;
  info.threading = "OpenMP";
  EXPECT_EQ(openblas_version(info), "OpenBLAS 0.3.21");
  EXPECT_EQ(describe(info), "OpenBLAS 0.3.21, core Cooperlake, 1 thread (OpenMP)");
  info.threads = 2;
  EXPECT_EQ(describe(info), "OpenBLAS 0.3.21, core Cooperlake, 2 threads (OpenMP)");
  EXPECT_EQ(describe(kAvx512), "AVX-512");
  EXPECT_EQ(describe(kAvx2), "AVX2");
  EXPECT_EQ(describe(kNoAvx2), "no AVX2");
}

// core_test links no BLAS: nothing is loaded to ask, and the report says so instead of guessing.
TEST(BlasKernels, AProcessWithoutOpenBlasReportsThat) {
  EXPECT_FALSE(loaded_openblas().has_value());
  const BlasReport report = report_loaded_blas();
  EXPECT_FALSE(report.fallback);
  EXPECT_NE(report.line.find("not OpenBLAS"), std::string::npos) << report.line;
}

// The system's OpenBLAS (tools/bootstrap.sh installs libopenblas0-openmp), asked as the agent
// asks it.
TEST(BlasKernels, ProbesTheSystemsOpenBlas) {
  const std::optional<OpenBlasInfo> info = probe_openblas();
  ASSERT_TRUE(info.has_value()) << "no OpenBLAS behind libblas.so.3 or libopenblas.so.0 (make deps installs it)";
  EXPECT_EQ(info->config.rfind("OpenBLAS ", 0), 0u) << info->config;
  EXPECT_FALSE(info->core.empty());
  EXPECT_GE(info->threads, 1);
}

}  // namespace
}  // namespace tenax
