#include "fuzz/hdf5_probe.h"

#include <fcntl.h>
#include <hdf5.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <system_error>
#include <vector>

#include "hdf5_handle.h"  // storage/src: H5Handle and the five fixed datatypes

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TENAX_FUZZ_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define TENAX_FUZZ_ASAN 1
#endif
#if defined(TENAX_FUZZ_ASAN)
#include <sanitizer/common_interface_defs.h>
#endif

namespace tenax::storage::fuzz {
namespace {

namespace fs = std::filesystem;
using detail::H5Handle;

constexpr unsigned kTimeLimitSec = 20;  // below the run's -timeout

#if defined(TENAX_FUZZ_ASAN)
// A sanitizer report inside libhdf5 ends the child with this status.
[[noreturn]] void child_died() { ::_exit(86); }
#endif

// What detail::error_text() does with the error stack, without Tenax's string building.
herr_t touch_error(unsigned /*n*/, const H5E_error2_t* err, void* client) {
  auto* total = static_cast<std::size_t*>(client);
  if (err != nullptr && err->desc != nullptr) *total += std::strlen(err->desc);
  if (err != nullptr && err->func_name != nullptr) *total += std::strlen(err->func_name);
  return 0;
}

// A failed HDF5 call, after which the reader collects the error stack.
bool failed() {
  std::size_t total = 0;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, &touch_error, &total);
  H5Eclear2(H5E_DEFAULT);
  return false;
}

// CheckpointReader::read's HDF5 calls for one tensor, in its order and with its arguments.
// Returns whether read() would succeed. Keep in step with storage/src/checkpoint_reader.cpp.
bool replay_read(hid_t file, std::uint64_t file_bytes, const IndexEntry& entry) {
  H5Handle dset = detail::dataset_handle(H5Dopen2(file, entry.name.c_str(), H5P_DEFAULT));
  if (!dset.valid()) return failed();
  H5Handle expected_type = detail::make_datatype(entry.dtype);
  H5Handle file_type = detail::datatype_handle(H5Dget_type(dset.get()));
  if (!expected_type.valid() || !file_type.valid()) return failed();
  const htri_t same = H5Tequal(file_type.get(), expected_type.get());
  if (same < 0) return failed();
  if (same == 0) return false;
  H5Handle space = detail::dataspace_handle(H5Dget_space(dset.get()));
  if (!space.valid()) return failed();
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) return failed();
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  if (rank > 0 && H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0) {
    return failed();
  }
  if (std::vector<std::int64_t>(dims.begin(), dims.end()) != entry.shape) return false;
  if (entry.nbytes > 0 && H5Dget_storage_size(dset.get()) != entry.nbytes) return false;
  // The reader now allocates nbytes: that is Tenax's doing, not HDF5's, so a size no shard
  // can hold stops the probe here and is left to the reader (and the sanitizers) to face.
  if (entry.nbytes > file_bytes) return false;
  std::vector<std::uint8_t> bytes(entry.nbytes);
  if (entry.nbytes > 0 && H5Dread(dset.get(), expected_type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()) < 0) {
    return failed();
  }
  return XXH3_64bits(bytes.data(), bytes.size()) == entry.checksum;
}

// The reader's HDF5 life on one checkpoint: shards opened lazily and cached (a failed open is
// retried on the next read), verify_all() reading until the first failure, the harness reading
// every tensor, then the shards closed in name order.
void replay_reader(const fs::path& step_dir, const Manifest& manifest) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  // Like the reader: each shard's bytes in memory, HDF5 over that image (never the file).
  struct Shard {
    std::vector<std::uint8_t> bytes;
    detail::FileImage view;
    H5Handle file;  // after the bytes: closed first
  };
  std::map<std::string, Shard> files;
  for (const ShardSummary& s : manifest.shards) files[s.file];
  const auto read = [&](const IndexEntry& entry) {
    Shard& shard = files[entry.shard];
    if (!shard.file.valid()) {
      std::ifstream in(step_dir / entry.shard, std::ios::binary);
      shard.bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      shard.view = detail::FileImage{shard.bytes.data(), shard.bytes.size()};
      shard.file = detail::open_image_read_only(shard.view);
      if (!shard.file.valid()) return failed();
    }
    return replay_read(shard.file.get(), shard.bytes.size(), entry);
  };
  for (const auto& [name, entry] : manifest.tensors) {
    if (!read(entry)) break;
  }
  for (const auto& [name, entry] : manifest.tensors) read(entry);
  files.clear();
}

}  // namespace

ProbeResult probe_hdf5(const fs::path& step_dir, const Manifest& manifest) {
  const pid_t pid = ::fork();
  if (pid < 0) return ProbeResult::kSurvived;  // cannot tell: let the real reader run
  if (pid == 0) {
    // The child: quiet, bounded in time, and any death is reported through its exit status
    // (never through libFuzzer's handlers, which would write a crash artifact).
    const int devnull = ::open("/dev/null", O_WRONLY);
    if (devnull >= 0) {
      ::dup2(devnull, STDOUT_FILENO);
      ::dup2(devnull, STDERR_FILENO);
    }
    for (int sig : {SIGABRT, SIGALRM, SIGBUS, SIGFPE, SIGILL, SIGSEGV}) std::signal(sig, SIG_DFL);
#if defined(TENAX_FUZZ_ASAN)
    __sanitizer_set_death_callback(&child_died);
#endif
    ::alarm(kTimeLimitSec);
    replay_reader(step_dir, manifest);
    ::_exit(0);  // no atexit handlers: they belong to the parent
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return ProbeResult::kSurvived;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return ProbeResult::kSurvived;
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) return ProbeResult::kHung;
  return ProbeResult::kCrashed;
}

}  // namespace tenax::storage::fuzz
