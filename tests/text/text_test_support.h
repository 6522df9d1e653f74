// Where the text tests find the fetched assets and their goldens.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <zlib.h>

namespace tenax::test {

/// $TENAX_ASSETS, else the directory CMake was configured with (<repo>/.assets).
inline std::string assets_dir() {
  const char* env = std::getenv("TENAX_ASSETS");
  return env && *env ? env : TENAX_TEST_ASSETS_DIR;
}

/// The path of an asset; throws, naming the fix, when it is missing (the test then fails).
inline std::string asset(const std::string& relative) {
  const std::string path = assets_dir() + "/" + relative;
  if (!std::filesystem::exists(path)) {
    throw std::runtime_error(path + " is missing: run `make assets` (tools/fetch_assets.sh)");
  }
  return path;
}

/// The lines of a gzip file (zlib), without their "\n".
inline std::vector<std::string> read_gzip_lines(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot open " + path);
  std::string data;
  char buffer[1 << 16];
  int n;
  while ((n = gzread(f, buffer, sizeof buffer)) > 0) data.append(buffer, static_cast<size_t>(n));
  int err = 0;
  const char* message = gzerror(f, &err);
  const std::string why = message ? message : "";
  gzclose(f);
  if (n < 0 || (err != Z_OK && err != Z_STREAM_END)) {
    throw std::runtime_error(path + ": gzip read error: " + why);
  }
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < data.size()) {
    std::size_t end = data.find('\n', start);
    if (end == std::string::npos) end = data.size();
    lines.push_back(data.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

}  // namespace tenax::test
