#include "ckpt_export.h"

#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <system_error>
#include <vector>

#include "ckpt_step_dir.h"
#include "tenax/core/exit_codes.h"
#include "tenax/core/error.h"
#include "tenax/core/files.h"
#include "tenax/storage/safetensors.h"

namespace tenax::launcher {
namespace fs = std::filesystem;

namespace {

constexpr const char* kFilesPrefix = "files/";
constexpr const char* kWeightsFile = "model.safetensors";

// What export writes, gathered and verified before anything touches the disk.
struct ExportPlan {
  std::vector<storage::TensorRef> weights;   ///< borrow from `data`
  std::map<std::string, std::string> files;  ///< file name → contents
  std::map<std::string, storage::TensorData> data;
  std::uint64_t weight_bytes = 0;
};

// Why a "files/<name>" entry may not become OUT_DIR/<name>, or "" when it may.
std::string unsafe_file_name(const std::string& name) {
  if (name.empty()) return "empty file name";
  if (name.find('/') != std::string::npos) return "file name contains '/'";
  if (name.find("..") != std::string::npos) return "file name contains \"..\"";
  if (name.find('\0') != std::string::npos) return "file name contains a NUL byte";
  if (name.front() == '.') return "hidden file names are not exported";
  if (name == kWeightsFile) return fmt::format("would overwrite the exported {}", kWeightsFile);
  return "";
}

int fail(const std::string& message) {
  std::cerr << fmt::format("tenax ckpt export: {}\n", message);
  return kExitFailure;
}

int usage_error(const std::string& message) {
  std::cerr << fmt::format("tenax ckpt export: {}\n", message);
  return kExitUsage;
}

// Reads and checks everything to export. Returns 0 or an exit code (message printed).
int plan_export(const storage::CheckpointReader& reader, const ExportOptions& options, ExportPlan& plan) {
  for (const auto& [name, entry] : reader.manifest().tensors) {
    const bool weight = name.rfind(options.prefix, 0) == 0;
    const bool file = name.rfind(kFilesPrefix, 0) == 0;
    if (!weight && !file) continue;
    if (file) {
      const std::string file_name = name.substr(std::string(kFilesPrefix).size());
      const std::string why = unsafe_file_name(file_name);
      if (!why.empty()) return fail(fmt::format("tensor '{}': refusing to export it: {}", name, why));
      if (entry.dtype != storage::DType::kUInt8) {
        return fail(
            fmt::format("tensor '{}': a files/ tensor must be uint8, not {}", name, storage::dtype_name(entry.dtype)));
      }
    }
    auto tensor = reader.read(name);
    if (!tensor.is_ok()) return fail(fmt::format("corrupt checkpoint: {}", tensor.status().to_string()));
    const storage::TensorData& t = plan.data.emplace(name, std::move(tensor).value()).first->second;
    if (file) {
      plan.files.emplace(name.substr(std::string(kFilesPrefix).size()), std::string(t.bytes.begin(), t.bytes.end()));
    }
    if (weight) {
      const std::string hf_name = name.substr(options.prefix.size());
      if (hf_name.empty()) return fail(fmt::format("tensor '{}': nothing left after the prefix", name));
      plan.weights.push_back(storage::TensorRef{hf_name, t.dtype, t.shape, t.bytes.data(), t.bytes.size()});
      plan.weight_bytes += t.bytes.size();
    }
  }
  if (plan.weights.empty()) {
    return usage_error(
        fmt::format("no tensor named {0}* in {1}; pick the prefix with --prefix (see `tenax ckpt "
                    "inspect {1}`)",
                    options.prefix, options.step_dir));
  }
  return kExitDone;
}

// Writes the plan into OUT_DIR/.export-tmp, then renames each file into OUT_DIR.
int write_export(const ExportPlan& plan, const fs::path& out_dir) {
  const fs::path staging = out_dir / kExportStagingDir;
  std::error_code ec;
  fs::remove_all(staging, ec);
  if (ec) return fail(fmt::format("cannot remove the stale {}: {}", staging.string(), ec.message()));
  fs::create_directory(staging, ec);
  if (ec) return fail(fmt::format("cannot create {}: {}", staging.string(), ec.message()));

  auto cleanup = [&staging] {
    std::error_code ignored;
    fs::remove_all(staging, ignored);
  };
  const Status written = storage::write_safetensors(staging / kWeightsFile, plan.weights, {{"format", "pt"}});
  if (!written.is_ok()) {
    cleanup();
    return fail(written.to_string());
  }
  try {
    for (const auto& [name, contents] : plan.files) files::atomic_write(staging / name, contents);
    files::durable_rename(staging / kWeightsFile, out_dir / kWeightsFile);
    for (const auto& [name, contents] : plan.files) {
      files::durable_rename(staging / name, out_dir / name);
    }
  } catch (const StorageError& e) {
    cleanup();
    return fail(e.what());
  }
  fs::remove(staging, ec);
  if (ec) return fail(fmt::format("exported, but cannot remove {}: {}", staging.string(), ec.message()));
  return kExitDone;
}

}  // namespace

int export_checkpoint(const ExportOptions& options) {
  // Usage errors first, before any expensive reading.
  const fs::path out_dir = options.out_dir;
  std::error_code ec;
  const fs::file_status out_status = fs::status(out_dir, ec);
  if (fs::exists(out_status)) {
    if (!fs::is_directory(out_status)) {
      return usage_error(fmt::format("{}: exists and is not a directory", options.out_dir));
    }
    const bool empty = fs::is_empty(out_dir, ec);
    if (ec) return usage_error(fmt::format("{}: cannot list: {}", options.out_dir, ec.message()));
    if (!empty && !options.overwrite) {
      return usage_error(
          fmt::format("{}: not empty; choose a new directory, or pass --force to replace the exported files in it",
                      options.out_dir));
    }
  }

  int exit_code = kExitDone;
  auto reader = open_step_dir(options.step_dir, "export", exit_code);
  if (!reader) return exit_code;
  const Status verified = reader->verify_all();
  if (!verified.is_ok()) {
    return fail(fmt::format("corrupt checkpoint, nothing exported: {}", verified.to_string()));
  }
  ExportPlan plan;
  if (int code = plan_export(*reader, options, plan)) return code;

  const bool created = !fs::exists(out_status);
  if (created) {
    fs::create_directories(out_dir, ec);
    if (ec) return fail(fmt::format("cannot create {}: {}", options.out_dir, ec.message()));
  }
  if (int code = write_export(plan, out_dir)) {
    if (created) fs::remove(out_dir, ec);  // only if still empty
    return code;
  }
  std::cout << "exported " << plan.weights.size() << " tensors (" << plan.weight_bytes << " bytes) named "
            << options.prefix << "* to " << (out_dir / kWeightsFile).string();
  for (const auto& [name, contents] : plan.files) std::cout << ", " << name;
  std::cout << "\n";
  return kExitDone;
}

}  // namespace tenax::launcher
