// The one file a reader fuzz target writes each input into when the reader under test takes a
// path (read_safetensors, read_idx_ubyte), and the abort that records a broken promise. Shared
// by the harnesses of safetensors_reader_fuzz, idx_reader_fuzz and image_decoder_fuzz.
//
// The file lives in a directory of its own per process (under /dev/shm when it exists and is
// writable, for speed; else the temp directory) and is removed at exit. A process that dies
// leaves it behind: `rm -rf /dev/shm/tenax-fuzz-*`.
//
// Thread-safety: none; libFuzzer and the replay call the harness from one thread.
//
//   static ScratchFile scratch("idx_reader_fuzz", "input.idx");
//   read_idx_ubyte(scratch.write(bytes), 3);
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>

namespace tenax::fuzz {

/// A broken promise of the code under test (or an environment failure of the harness):
/// prints `target: what` and aborts, so libFuzzer keeps the input and the replay fails.
[[noreturn]] inline void violated(const char* target, const std::string& what) {
  std::fprintf(stderr, "%s: %s\n", target, what.c_str());
  std::fflush(stderr);
  std::abort();
}

class ScratchFile {
 public:
  ScratchFile(const char* target, const std::string& name) : target_(target) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path shm = "/dev/shm";
    const fs::path base =
        fs::is_directory(shm, ec) && ::access(shm.c_str(), W_OK) == 0 ? shm : fs::temp_directory_path();
    dir_ = base / ("tenax-fuzz-" + std::string(target) + "-" + std::to_string(::getpid()));
    fs::remove_all(dir_, ec);
    fs::create_directories(dir_, ec);
    if (ec) violated(target_, "cannot create " + dir_.string() + ": " + ec.message());
    path_ = dir_ / name;
  }
  ~ScratchFile() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  /// Replaces the file's content with `bytes`; returns its path.
  const std::filesystem::path& write(std::string_view bytes) const {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) violated(target_, "cannot write " + path_.string());
    return path_;
  }

  /// The scratch directory (for files a harness writes besides the input).
  const std::filesystem::path& dir() const { return dir_; }

 private:
  const char* target_;
  std::filesystem::path dir_;
  std::filesystem::path path_;
};

}  // namespace tenax::fuzz
