#include "file_digest.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "tenax/core/checksum.h"
#include "tenax/core/error.h"

namespace tenax::storage::detail {

FileDigest digest_file(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw StorageError("cannot open " + path.string() + ": " + std::strerror(errno));
  }
  constexpr std::size_t kChunk = std::size_t{1} << 20;
  const std::unique_ptr<char[]> buffer(new char[kChunk]);  // not zeroed: read() fills it
  Xxh3 hash;
  FileDigest digest;
  for (;;) {
    const ssize_t n = ::read(fd, buffer.get(), kChunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw StorageError("cannot read " + path.string() + ": " + std::strerror(err));
    }
    if (n == 0) break;
    hash.update(buffer.get(), static_cast<std::size_t>(n));
    digest.bytes += static_cast<std::uint64_t>(n);
  }
  ::close(fd);
  digest.checksum = hash.digest();
  return digest;
}

FileDigest read_file_into(const std::filesystem::path& path, void* buffer, std::size_t capacity) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw StorageError("cannot open " + path.string() + ": " + std::strerror(errno));
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  auto* out = static_cast<char*>(buffer);
  Xxh3 hash;
  FileDigest digest;
  // 8 MiB at a time: large sequential reads, each hashed while it is still in the CPU cache.
  constexpr std::size_t kChunk = std::size_t{8} << 20;
  while (digest.bytes < capacity) {
    const std::size_t want = std::min<std::size_t>(kChunk, capacity - static_cast<std::size_t>(digest.bytes));
    const ssize_t n = ::read(fd, out + digest.bytes, want);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw StorageError("cannot read " + path.string() + ": " + std::strerror(err));
    }
    if (n == 0) break;
    hash.update(out + digest.bytes, static_cast<std::size_t>(n));
    digest.bytes += static_cast<std::uint64_t>(n);
  }
  if (digest.bytes == capacity) {
    char extra = 0;
    ssize_t n;
    do {
      n = ::read(fd, &extra, 1);
    } while (n < 0 && errno == EINTR);
    if (n > 0) ++digest.bytes;  // the file is longer than expected
  }
  ::close(fd);
  digest.checksum = hash.digest();
  return digest;
}

}  // namespace tenax::storage::detail
