// Replays inputs through the fuzz target without libFuzzer, so the committed corpus and any
// findings run in `make test` with the normal compiler (ctest StorageFuzzCorpusReplay).
//
//   storage_fuzz_corpus_replay tests/fuzz/corpus [tests/fuzz/findings] [file ...]
//
// Every argument must exist; directories are read in name order, not recursively. A crash, a
// failed harness check (abort) or an uncaught exception (std::terminate) fails the run; the
// name of each input is printed before it runs so the culprit is the last line.
//
// Outside sanitizer builds the process's address space is capped at 2 GiB (kMaxAddressSpaceMb), as
// libFuzzer caps a fuzzing process's mallocs at 2 GiB: an input that makes a reader allocate
// what a damaged header announces (findings/idx_reader_fuzz/header-announces-4gib) then fails
// with std::bad_alloc instead of passing on a machine with memory to spare. Sanitizer builds
// reserve terabytes of shadow memory, so there the sanitizer's own limit (sanitizer_options.cpp,
// max_allocation_size_mb) does this instead.

#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TENAX_REPLAY_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define TENAX_REPLAY_SANITIZED 1
#endif
#endif

namespace {

namespace fs = std::filesystem;

constexpr rlim_t kMaxAddressSpaceMb = 2048;

void cap_address_space() {
#ifndef TENAX_REPLAY_SANITIZED
  rlimit limit{};
  if (::getrlimit(RLIMIT_AS, &limit) != 0) return;
  const rlim_t cap = kMaxAddressSpaceMb << 20;
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < cap) return;
  if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur > cap) {
    limit.rlim_cur = cap;
    if (::setrlimit(RLIMIT_AS, &limit) != 0) std::perror("replay: setrlimit(RLIMIT_AS)");
  }
#endif
}

bool collect(const fs::path& arg, std::vector<fs::path>& inputs) {
  std::error_code ec;
  if (fs::is_regular_file(arg, ec)) {
    inputs.push_back(arg);
    return true;
  }
  if (!fs::is_directory(arg, ec)) return false;
  std::vector<fs::path> found;
  for (const fs::directory_entry& entry : fs::directory_iterator(arg, ec)) {
    if (entry.is_regular_file(ec)) found.push_back(entry.path());
  }
  if (ec) return false;
  std::sort(found.begin(), found.end());
  inputs.insert(inputs.end(), found.begin(), found.end());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  cap_address_space();
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <corpus dir or file>...\n", argv[0]);
    return 2;
  }
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    if (!collect(argv[i], inputs)) {
      std::fprintf(stderr, "replay: %s: no such file or directory\n", argv[i]);
      return 1;
    }
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "replay: no inputs found\n");
    return 1;
  }
  for (const fs::path& path : inputs) {
    std::printf("replay: %s\n", path.c_str());
    std::fflush(stdout);
    std::ifstream in(path, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.eof() && in.fail()) {
      std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
      return 1;
    }
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("replay: %zu inputs, all clean\n", inputs.size());
  return 0;
}
