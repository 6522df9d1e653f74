#include "region_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "background_io.h"
#include "tenax/core/checksum.h"
#include "tenax/core/error.h"
#include "tenax/core/unique_fd.h"

namespace tenax::storage::detail {
namespace {

// One O_DIRECT write: large enough that the device sees long sequential requests, small
// enough to stay a bounded, reused allocation.
constexpr std::size_t kBounceBytes = std::size_t{8} << 20;
// The copy into the bounce buffer and the hash go this much at a time, so the hash reads
// what the copy just brought into the CPU's cache instead of memory a second time.
constexpr std::size_t kHashSlice = std::size_t{256} << 10;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

std::string io_error(const std::filesystem::path& path, const char* what, int err) {
  return std::string("cannot ") + what + " " + path.string() + ": " + std::strerror(err);
}

// pwrite until all of `n` is out. Returns 0, or the errno of the failed call.
int pwrite_all(int fd, const char* data, std::size_t n, std::uint64_t offset) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, data, n, static_cast<off_t>(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    data += w;
    n -= static_cast<std::size_t>(w);
    offset += static_cast<std::uint64_t>(w);
  }
  return 0;
}

class Writer {
 public:
  Writer(const std::filesystem::path& path, std::uint64_t file_size)
      : path_(path), file_size_(file_size), fd_(::open(path.c_str(), O_RDWR | O_CLOEXEC)) {
    if (!fd_) throw StorageError(io_error(path, "open", errno));
    struct stat st {};
    if (::fstat(fd_.get(), &st) != 0) throw StorageError(io_error(path, "stat", errno));
    if (static_cast<std::uint64_t>(st.st_size) != file_size) {
      throw StorageError(path.string() + " has " + std::to_string(st.st_size) + " bytes, expected " +
                         std::to_string(file_size));
    }
    // No O_DIRECT (tmpfs, some FUSE file systems): EINVAL here, and every byte is buffered.
    direct_fd_.reset(::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_DIRECT));
    if (direct_fd_) direct_ = std::make_unique<BackgroundIo>();
  }

  void write(const Region& r) {
    hash_file_until(r.offset);
    const char* src = static_cast<const char*>(r.data);
    std::uint64_t offset = r.offset;
    std::uint64_t left = r.nbytes;
    if (direct_fd_ && offset % kDirectIoAlignment == 0) {
      while (left >= kDirectIoAlignment && direct_fd_) {
        const std::size_t n = static_cast<std::size_t>(
            std::min<std::uint64_t>(kBounceBytes, left / kDirectIoAlignment * kDirectIoAlignment));
        char* bounce = this->bounce(chunks_++ % 2);
        for (std::size_t done = 0; done < n; done += kHashSlice) {
          const std::size_t slice = std::min(kHashSlice, n - done);
          std::memcpy(bounce + done, src + done, slice);
          file_hash_.update(bounce + done, slice);
        }
        finish_direct_write();
        if (direct_fd_) {
          direct_->start(
              [fd = direct_fd_.get(), bounce, n, offset]() -> long { return pwrite_all(fd, bounce, n, offset); });
          in_flight_ = Region{offset, src, n};
        } else {
          write_buffered(src, n, offset);
        }
        src += n;
        offset += n;
        left -= n;
      }
    }
    if (left > 0) {
      file_hash_.update(src, static_cast<std::size_t>(left));
      write_buffered(src, static_cast<std::size_t>(left), offset);
    }
    pos_ = r.offset + r.nbytes;
  }

  FileDigest finish() {
    finish_direct_write();
    hash_file_until(file_size_);
    return FileDigest{file_size_, file_hash_.digest()};
  }

 private:
  // Two buffers: one being filled while the other is written.
  char* bounce(std::size_t which) {
    auto& buffer = bounce_[which];
    if (!buffer) {
      void* p = nullptr;
      if (::posix_memalign(&p, kDirectIoAlignment, kBounceBytes) != 0) throw StorageError("out of memory");
      buffer.reset(p);
    }
    return static_cast<char*>(buffer.get());
  }

  // Waits for the O_DIRECT write in flight. EINVAL: this file system or device refuses the
  // alignment after all; that chunk and the rest of the shard go through the page cache. Any
  // other error is the disk's.
  void finish_direct_write() {
    if (!direct_ || in_flight_.nbytes == 0) return;
    const auto err = static_cast<int>(direct_->wait());
    const Region chunk = std::exchange(in_flight_, Region{});
    if (err == 0) return;
    if (err != EINVAL) throw StorageError(io_error(path_, "write", err));
    direct_.reset();
    direct_fd_.reset();
    write_buffered(static_cast<const char*>(chunk.data), static_cast<std::size_t>(chunk.nbytes), chunk.offset);
  }

  void write_buffered(const char* data, std::size_t n, std::uint64_t offset) {
    if (const int err = pwrite_all(fd_.get(), data, n, offset); err != 0) {
      throw StorageError(io_error(path_, "write", err));
    }
  }

  // Hashes the file's bytes from pos_ to `end` as they are on disk: HDF5's metadata.
  void hash_file_until(std::uint64_t end) {
    constexpr std::size_t kChunk = std::size_t{1} << 20;
    while (pos_ < end) {
      if (!gap_) gap_.reset(new char[kChunk]);
      const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(kChunk, end - pos_));
      const ssize_t n = ::pread(fd_.get(), gap_.get(), want, static_cast<off_t>(pos_));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw StorageError(io_error(path_, "read", errno));
      if (n == 0) throw StorageError(path_.string() + " ended at byte " + std::to_string(pos_) + " while being hashed");
      file_hash_.update(gap_.get(), static_cast<std::size_t>(n));
      pos_ += static_cast<std::uint64_t>(n);
    }
  }

  const std::filesystem::path& path_;
  const std::uint64_t file_size_;
  UniqueFd fd_;
  UniqueFd direct_fd_;
  std::unique_ptr<void, FreeDeleter> bounce_[2];
  std::unique_ptr<BackgroundIo> direct_;  // after the buffers: it ends (joins) before they are freed
  Region in_flight_;                      // the chunk direct_ is writing (its source, for a retry)
  std::size_t chunks_ = 0;
  std::unique_ptr<char[]> gap_;
  Xxh3 file_hash_;
  std::uint64_t pos_ = 0;
};

}  // namespace

FileDigest write_regions(const std::filesystem::path& path, std::uint64_t file_size, std::vector<Region> regions) {
  std::sort(regions.begin(), regions.end(), [](const Region& a, const Region& b) { return a.offset < b.offset; });
  std::uint64_t end = 0;
  for (const Region& r : regions) {
    if (r.offset < end || r.offset > file_size || r.nbytes > file_size - r.offset) {
      throw StorageError(path.string() + ": region at " + std::to_string(r.offset) + " (+" + std::to_string(r.nbytes) +
                         ") overlaps another or lies outside the file");
    }
    end = r.offset + r.nbytes;
  }
  Writer writer(path, file_size);
  for (const Region& r : regions) {
    if (r.nbytes > 0) writer.write(r);
  }
  return writer.finish();
}

}  // namespace tenax::storage::detail
