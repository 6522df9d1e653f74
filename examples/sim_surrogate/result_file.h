// The result of a run: the whole final field and the surrogate's predictions on the fixed probe
// stencils, as text with every double printed exactly (%.17g round-trips), so that two runs —
// one uninterrupted, one killed and resumed — can be compared byte for byte with cmp.
// Written atomically (a temporary file renamed into place) by rank 0.
// Thread-safety: none.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sim {

struct RunResult {
  std::int64_t nx = 0;
  std::int64_t ny = 0;
  std::int64_t step = 0;
  double time = 0.0;
  std::vector<double> field;        ///< ny x nx, row-major
  std::vector<double> probes;       ///< count x kStencil
  std::vector<double> predictions;  ///< the surrogate's u(t + dt) per probe (empty: no surrogate)
  std::vector<double> exact;        ///< the solver's own update per probe
};

/// Writes `result` to `path` (the directory must exist); returns a 64-bit FNV-1a digest of the
/// bytes, for the progress output. Throws std::runtime_error naming the file on failure.
std::uint64_t write_result(const std::string& path, const RunResult& result);

}  // namespace sim
