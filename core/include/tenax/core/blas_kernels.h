// Which BLAS kernels a process trains with, and whether they are the CPU's best.
//
// Debian's libtorch does its matrix products in OpenBLAS (a DYNAMIC_ARCH build that picks its
// kernels for the CPU when it is loaded). An OpenBLAS older than the CPU does not recognise it
// and falls back to its oldest kernels: Debian 12's 0.3.21 on a 2023 Xeon says "Prescott" and
// trains with SSE3 on a CPU with AVX-512, a third of the speed. OPENBLAS_CORETYPE, read once
// when the library loads, overrides the choice; so the decision has to be taken before a
// worker starts: `tenax run` takes it (launcher) and every Trainer logs what it got.
//
// Thread-safety: the functions are safe to call from any thread; probe_openblas() loads a
// library and is meant for start-up.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tenax {

/// The instruction sets that decide which OpenBLAS kernels are worth having.
struct CpuVectorFeatures {
  bool avx2_fma = false;  ///< AVX2 and FMA3: OpenBLAS's Haswell kernels
  bool avx512 = false;    ///< AVX-512 F, BW, DQ, VL and CD: its SkylakeX kernels
};

/// This CPU's, from CPUID.
CpuVectorFeatures detect_cpu_vector_features();

/// What OpenBLAS says of itself.
struct OpenBlasInfo {
  std::string core;       ///< openblas_get_corename(): "Cooperlake", "Haswell", "Prescott", ...
  std::string config;     ///< openblas_get_config(): "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ..."
  int threads = 0;        ///< openblas_get_num_threads()
  std::string threading;  ///< openblas_get_parallel(): "sequential", "pthreads" or "OpenMP"
};

/// The OpenBLAS already loaded into this process (through libtorch), or nullopt when the
/// process's BLAS is another library (MKL in PyPI's torch, the reference BLAS, none).
std::optional<OpenBlasInfo> loaded_openblas();

/// Loads the system's BLAS (libblas.so.3, else libopenblas.so.0) into this process to ask it,
/// for a process that does not link one (the `tenax` agent): nullopt when neither loads or the
/// library is not OpenBLAS. The answer follows this process's OPENBLAS_CORETYPE, as a worker's
/// would.
std::optional<OpenBlasInfo> probe_openblas();

/// True for a core whose kernels use AVX2 or AVX-512 (Haswell, Zen, SkylakeX, Cooperlake,
/// SapphireRapids); false for the older ones (Prescott, Nehalem, Sandybridge, ...) and for
/// names this table does not know.
bool is_vector_openblas_core(std::string_view core);

/// The pure decision: the OPENBLAS_CORETYPE a worker should get when OpenBLAS chose `core` on a
/// CPU with `cpu`, or nullopt when OpenBLAS's own choice is already the right one. Only a
/// fallback to pre-AVX2 kernels on a CPU that has AVX2 or AVX-512 is corrected, and only to the
/// kernels the CPU certainly runs (SkylakeX for AVX-512, Haswell for AVX2).
std::optional<std::string> better_openblas_core(std::string_view core, CpuVectorFeatures cpu);

/// "OpenBLAS 0.3.21" from its config string.
std::string openblas_version(const OpenBlasInfo& info);

/// "OpenBLAS 0.3.21, core Cooperlake, 2 threads (OpenMP)".
std::string describe(const OpenBlasInfo& info);

/// One line on the CPU: "AVX-512", "AVX2", or "no AVX2".
std::string describe(CpuVectorFeatures cpu);

/// A worker's start-up line on the BLAS it trains with, from loaded_openblas().
struct BlasReport {
  std::string line;       ///< "BLAS: OpenBLAS 0.3.21, core Cooperlake, 1 thread (OpenMP); CPU AVX-512"
  bool fallback = false;  ///< the kernels are older than the CPU: `line` says what to do
};
BlasReport report_loaded_blas();

}  // namespace tenax
