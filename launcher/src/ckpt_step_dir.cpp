#include "ckpt_step_dir.h"

#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <system_error>

#include "tenax/core/exit_codes.h"
#include "tenax/storage/layout.h"

namespace tenax::launcher {
namespace fs = std::filesystem;

namespace {

// Whether `dir` looks like a checkpoints root (it holds step-* directories).
bool holds_step_dirs(const fs::path& dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (storage::parse_step_dir_name(it->path().filename().string())) return true;
  }
  return false;
}

}  // namespace

std::optional<storage::CheckpointReader> open_step_dir(const std::string& step_dir, const std::string& subcommand,
                                                       int& exit_code) {
  const std::string prefix = fmt::format("tenax ckpt {}: {}: ", subcommand, step_dir);
  std::error_code ec;
  const fs::file_status status = fs::status(step_dir, ec);
  if (!fs::exists(status)) {
    std::cerr << prefix << "no such directory\n";
    exit_code = kExitUsage;
    return std::nullopt;
  }
  if (!fs::is_directory(status)) {
    std::cerr << prefix << "not a directory (expected a step directory such as "
              << "checkpoints/" << storage::step_dir_name(500) << ")\n";
    exit_code = kExitUsage;
    return std::nullopt;
  }
  auto reader = storage::CheckpointReader::open(step_dir);
  if (reader.is_ok()) return std::move(reader).value();
  if (reader.status().code() == StatusCode::kNotFound) {
    std::cerr << prefix << "no " << storage::kManifestFile << ", so not a committed checkpoint";
    if (holds_step_dirs(step_dir)) {
      std::cerr << "; this looks like a checkpoints directory: pass one of its step-* "
                << "directories (see `tenax ckpt ls " << step_dir << "`)";
    }
    std::cerr << "\n";
    exit_code = kExitUsage;
    return std::nullopt;
  }
  std::cerr << fmt::format("tenax ckpt {}: corrupt checkpoint: {}\n", subcommand, reader.status().to_string());
  exit_code = kExitFailure;
  return std::nullopt;
}

}  // namespace tenax::launcher
