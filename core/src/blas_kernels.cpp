#include "tenax/core/blas_kernels.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <sstream>

namespace tenax {
namespace {

// The cores of OpenBLAS's DYNAMIC_ARCH x86-64 builds whose GEMM kernels use AVX2 or AVX-512
// (kernel/x86_64/KERNEL.*; ZEN reuses Haswell's). Lower case: openblas_get_corename() and
// OPENBLAS_CORETYPE differ in case between versions.
constexpr std::array<std::string_view, 6> kVectorCores = {"haswell",        "zen", "skylakex", "cooperlake",
                                                          "sapphirerapids", "zen4"};

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

using CString = char* (*)();
using Int = int (*)();

// Asks the OpenBLAS behind `handle` (RTLD_DEFAULT: whatever this process has loaded).
std::optional<OpenBlasInfo> ask(void* handle) {
  auto corename = reinterpret_cast<CString>(dlsym(handle, "openblas_get_corename"));
  auto config = reinterpret_cast<CString>(dlsym(handle, "openblas_get_config"));
  auto threads = reinterpret_cast<Int>(dlsym(handle, "openblas_get_num_threads"));
  auto parallel = reinterpret_cast<Int>(dlsym(handle, "openblas_get_parallel"));
  if (corename == nullptr || config == nullptr) return std::nullopt;
  OpenBlasInfo info;
  const char* core = corename();
  const char* cfg = config();
  info.core = core ? core : "";
  info.config = cfg ? cfg : "";
  info.threads = threads ? threads() : 0;
  const int mode = parallel ? parallel() : -1;
  // An OpenMP OpenBLAS follows omp_get_max_threads() at its next call (torch::set_num_threads
  // sets that); openblas_get_num_threads() still says the count it started with until then.
  auto omp_threads = reinterpret_cast<Int>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  if (mode == 2 && omp_threads != nullptr) info.threads = omp_threads();
  info.threading = mode == 0 ? "sequential" : mode == 1 ? "pthreads" : mode == 2 ? "OpenMP" : "unknown threading";
  return info;
}

}  // namespace

CpuVectorFeatures detect_cpu_vector_features() {
  CpuVectorFeatures cpu;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  cpu.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  cpu.avx512 = cpu.avx2_fma && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512cd");
#endif
  return cpu;
}

std::optional<OpenBlasInfo> loaded_openblas() { return ask(RTLD_DEFAULT); }

std::optional<OpenBlasInfo> probe_openblas() {
  for (const char* name : {"libblas.so.3", "libopenblas.so.0"}) {
    // Kept loaded: unloading a library that started threads is not safe, and a second probe
    // finds it again at no cost.
    void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) continue;
    if (auto info = ask(handle)) return info;
  }
  return std::nullopt;
}

bool is_vector_openblas_core(std::string_view core) {
  const std::string name = lower(core);
  return std::find(kVectorCores.begin(), kVectorCores.end(), name) != kVectorCores.end();
}

std::optional<std::string> better_openblas_core(std::string_view core, CpuVectorFeatures cpu) {
  if (core.empty() || is_vector_openblas_core(core)) return std::nullopt;
  if (cpu.avx512) return std::string("SkylakeX");
  if (cpu.avx2_fma) return std::string("Haswell");
  return std::nullopt;  // the CPU has nothing better than what OpenBLAS chose
}

std::string openblas_version(const OpenBlasInfo& info) {
  // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ...": the first two words name the library.
  std::istringstream words(info.config);
  std::string name, version;
  words >> name >> version;
  return name.empty() ? std::string("OpenBLAS") : name + (version.empty() ? "" : " " + version);
}

std::string describe(const OpenBlasInfo& info) {
  std::string out = openblas_version(info);
  out += ", core " + (info.core.empty() ? std::string("unknown") : info.core);
  out += ", " + std::to_string(info.threads) + (info.threads == 1 ? " thread" : " threads");
  out += " (" + info.threading + ")";
  return out;
}

std::string describe(CpuVectorFeatures cpu) { return cpu.avx512 ? "AVX-512" : cpu.avx2_fma ? "AVX2" : "no AVX2"; }

BlasReport report_loaded_blas() {
  const CpuVectorFeatures cpu = detect_cpu_vector_features();
  const std::optional<OpenBlasInfo> blas = loaded_openblas();
  BlasReport report;
  if (!blas) {
    report.line = "BLAS: not OpenBLAS (libtorch's own or another library); CPU " + describe(cpu);
    return report;
  }
  report.line = "BLAS: " + describe(*blas) + "; CPU " + describe(cpu);
  if (const auto better = better_openblas_core(blas->core, cpu)) {
    report.fallback = true;
    report.line += ". OpenBLAS runs its " + blas->core + " kernels on a CPU with " + describe(cpu) +
                   " (a fraction of its speed): start the workers with `tenax run`, which chooses the kernels, "
                   "or export OPENBLAS_CORETYPE=" +
                   *better;
  }
  return report;
}

}  // namespace tenax
