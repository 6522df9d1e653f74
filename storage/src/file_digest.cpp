#include "file_digest.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>

#include "tenax/core/checksum.h"
#include "tenax/core/error.h"
#include "tenax/core/unique_fd.h"

namespace tenax::storage::detail {
namespace {

// Reads `path` sequentially; `next(n)` says where the next read of at most `n` bytes goes (or
// nullptr to stop), `got(p, n)` sees each chunk read. Throws StorageError naming the path.
void read_chunks(const std::filesystem::path& path, std::size_t chunk, const std::function<char*(std::size_t&)>& next,
                 const std::function<void(const char*, std::size_t)>& got) {
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) throw StorageError("cannot open " + path.string() + ": " + std::strerror(errno));
  ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  for (;;) {
    std::size_t want = chunk;
    char* where = next(want);
    if (where == nullptr) break;
    const ssize_t n = ::read(fd.get(), where, want);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw StorageError("cannot read " + path.string() + ": " + std::strerror(errno));
    }
    if (n == 0) break;
    got(where, static_cast<std::size_t>(n));
  }
}

}  // namespace

FileDigest read_file_into(const std::filesystem::path& path, void* buffer, std::size_t capacity) {
  auto* out = static_cast<char*>(buffer);
  char extra = 0;  // one byte past the capacity tells a longer file
  Xxh3 hash;
  FileDigest digest;
  // 8 MiB at a time: large sequential reads, each hashed while it is still in the CPU cache.
  read_chunks(
      path, std::size_t{8} << 20,
      [&](std::size_t& want) -> char* {
        const auto done = static_cast<std::size_t>(digest.bytes);
        if (done > capacity) return nullptr;
        if (done == capacity) {
          want = 1;
          return &extra;
        }
        want = std::min(want, capacity - done);
        return out + done;
      },
      [&](const char* p, std::size_t n) {
        if (p != &extra) hash.update(p, n);
        digest.bytes += n;
      });
  digest.checksum = hash.digest();
  return digest;
}

}  // namespace tenax::storage::detail
