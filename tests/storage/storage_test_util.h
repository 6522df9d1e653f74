// Shared helpers of the storage tests: a fresh directory per test, byte-level file edits, and
// a one-call checkpoint writer.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tenax/core/files.h"
#include "tenax/core/unique_fd.h"
#include "tenax/storage/checkpoint_directory.h"
#include "tenax/storage/layout.h"
#include "tenax/storage/manifest.h"
#include "tenax/storage/shard_writer.h"
#include "tenax/storage/write_plan.h"

namespace tenax::storage::testing {

/// A test fixture with its own empty directory, removed after a passing test (kept on failure).
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::path(::testing::TempDir()) / ("tenax_storage_" + std::string(info->test_suite_name()) +
                                                          "_" + info->name() + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }
  std::filesystem::path dir_;
};

/// An owned tensor, to build TensorRefs from.
struct OwnedTensor {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> bytes;

  TensorRef ref() const { return TensorRef{name, dtype, shape, bytes.data(), bytes.size()}; }
};

/// A tensor whose bytes follow a position-dependent pattern (distinct per `seed`).
inline OwnedTensor pattern_tensor(std::string name, DType dtype, std::vector<std::int64_t> shape,
                                  std::uint32_t seed = 1) {
  std::size_t n = dtype_size(dtype);
  for (auto d : shape) n *= static_cast<std::size_t>(d);
  OwnedTensor t{std::move(name), dtype, std::move(shape), std::vector<std::uint8_t>(n)};
  std::uint32_t x = seed * 2654435761u + 12345u;
  for (auto& b : t.bytes) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<std::uint8_t>(x >> 24);
  }
  return t;
}

/// Writes `tensors` as a committed checkpoint of `world` shards (following plan_writes) under
/// root and returns the step directory.
inline std::filesystem::path write_checkpoint(const std::filesystem::path& root,
                                              const std::vector<OwnedTensor>& tensors, int world = 1,
                                              std::int64_t step = 100, std::int64_t generation = 0) {
  CheckpointDirectory dir(root);
  const auto tmp = dir.prepare_tmp(step, generation);
  std::vector<std::size_t> sizes;
  for (const auto& t : tensors) sizes.push_back(t.bytes.size());
  const std::vector<int> owner = plan_writes(sizes, world);
  std::vector<ShardInfo> infos;
  for (int r = 0; r < world; ++r) {
    std::vector<TensorRef> mine;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      if (owner[i] == r) mine.push_back(tensors[i].ref());
    }
    auto info = write_shard(tmp / shard_file_name(r, world), mine);
    EXPECT_TRUE(info.is_ok()) << info.status().to_string();
    infos.push_back(info.value());
  }
  Manifest m = make_manifest(step, /*epoch=*/1, generation, infos);
  const Status s = dir.commit(tmp, m);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return dir.step_dir(step);
}

inline std::string read_file(const std::filesystem::path& p) { return files::read_all(p); }

// Pages of `file` in the page cache, out of the pages of [offset, offset + nbytes).
inline std::size_t resident_pages(const std::filesystem::path& file, std::uint64_t offset, std::uint64_t nbytes) {
  const UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  const auto size = static_cast<std::size_t>(std::filesystem::file_size(file));
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd.get(), 0);
  if (map == MAP_FAILED) return SIZE_MAX;
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in_core((size + page - 1) / page);
  const int rc = ::mincore(map, size, in_core.data());
  ::munmap(map, size);
  if (rc != 0) return SIZE_MAX;
  std::size_t resident = 0;
  for (std::uint64_t p = offset / page; p < (offset + nbytes) / page; ++p) resident += in_core[p] & 1;
  return resident;
}

inline void write_file(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << p;
}

/// Runs a shell command; returns its exit status and combined output.
inline std::pair<int, std::string> run_command(const std::string& command) {
  std::string output;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return {-1, ""};
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) output.append(buf, n);
  const int status = ::pclose(pipe);
  return {status, output};
}

}  // namespace tenax::storage::testing
