#include "result_file.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "heat_solver.h"

namespace sim {

std::uint64_t write_result(const std::string& path, const RunResult& r) {
  std::string text;
  char line[160];
  auto add = [&](const char* fmt, auto... values) {
    std::snprintf(line, sizeof line, fmt, values...);
    text += line;
  };
  add("# sim_surrogate result: 2-D heat equation, %lld x %lld cells, solver step %lld, t = %.17g\n",
      static_cast<long long>(r.nx), static_cast<long long>(r.ny), static_cast<long long>(r.step), r.time);
  add("field %lld %lld\n", static_cast<long long>(r.ny), static_cast<long long>(r.nx));
  for (std::int64_t i = 0; i < r.ny; ++i) {
    for (std::int64_t j = 0; j < r.nx; ++j) {
      add(j + 1 < r.nx ? "%.17g " : "%.17g\n", r.field[static_cast<std::size_t>(i * r.nx + j)]);
    }
  }
  const std::size_t count = r.probes.size() / kStencil;
  add("probes %zu (centre north south west east -> surrogate, exact)\n", count);
  for (std::size_t p = 0; p < count; ++p) {
    const double* s = &r.probes[p * kStencil];
    add("%.17g %.17g %.17g %.17g %.17g -> ", s[0], s[1], s[2], s[3], s[4]);
    if (r.predictions.empty())
      add("none %.17g\n", r.exact[p]);
    else
      add("%.17g %.17g\n", r.predictions[p], r.exact[p]);
  }

  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) throw std::runtime_error("cannot write the result file " + tmp + ": check --result / --output-dir");
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !written) throw std::runtime_error("writing the result file " + tmp + " failed");
  std::filesystem::rename(tmp, path);

  std::uint64_t digest = 0xcbf29ce484222325ull;
  for (unsigned char c : text) digest = (digest ^ c) * 0x100000001b3ull;
  return digest;
}

}  // namespace sim
