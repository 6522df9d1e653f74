#include "tenax/storage/layout.h"

#include <cstdio>

#include "tenax/core/error.h"

namespace tenax::storage {
namespace {

constexpr const char* kStepPrefix = "step-";

}  // namespace

std::string step_dir_name(std::int64_t step) {
  if (step < 0) throw StorageError("step_dir_name: negative step " + std::to_string(step));
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%09lld", static_cast<long long>(step));
  return buf;
}

std::string tmp_dir_name(std::int64_t step, std::int64_t generation) {
  if (generation < 0) {
    throw StorageError("tmp_dir_name: negative generation " + std::to_string(generation));
  }
  return ".tmp-" + step_dir_name(step) + "-g" + std::to_string(generation);
}

std::string shard_file_name(int rank, int world) {
  if (world < 1 || rank < 0 || rank >= world) {
    throw StorageError("shard_file_name: rank " + std::to_string(rank) + " not in world of " + std::to_string(world));
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "shard-%05d-of-%05d.h5", rank, world);
  return buf;
}

std::optional<std::int64_t> parse_step_dir_name(const std::string& name) {
  const std::string prefix = kStepPrefix;
  if (name.size() < prefix.size() + 9 || name.compare(0, prefix.size(), prefix) != 0) {
    return std::nullopt;
  }
  const std::string digits = name.substr(prefix.size());
  if (digits.size() > 18) return std::nullopt;  // keeps the value inside int64
  std::int64_t step = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    step = step * 10 + (c - '0');
  }
  // Only the canonical spelling counts: "step-0000000500" is not a step directory.
  if (step_dir_name(step) != name) return std::nullopt;
  return step;
}

}  // namespace tenax::storage
