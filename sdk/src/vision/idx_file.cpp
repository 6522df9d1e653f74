#include "tenax/sdk/vision/idx_file.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <string>

#include <spdlog/fmt/fmt.h>

#include "tenax/core/error.h"

namespace tenax::sdk {
namespace {

// gzFile as RAII. gzopen reads a file without the gzip header as it is, so one path serves
// both the .gz files Debian ships and plain ones.
class GzReader {
 public:
  explicit GzReader(const std::filesystem::path& path) : path_(path), file_(gzopen(path.c_str(), "rb")) {
    if (file_ == nullptr) {
      const int error = errno;
      throw StorageError(fmt::format("IDX file {}: cannot open it: {}{}", path.string(), std::strerror(error),
                                     error == ENOENT ? " (Fashion-MNIST: install Debian's dataset-fashion-mnist, "
                                                       "tools/bootstrap.sh does)"
                                                     : ""));
    }
    gzbuffer(file_, 1 << 20);
  }
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;
  ~GzReader() { gzclose(file_); }

  /// Reads up to `size` bytes; fewer only at the end of the data. Throws on a read error (a
  /// corrupt or cut compressed stream).
  std::size_t read(void* out, std::size_t size) {
    std::size_t done = 0;
    auto* bytes = static_cast<unsigned char*>(out);
    while (done < size) {
      // gzread takes an unsigned count: read in chunks well under its limit.
      const auto chunk = static_cast<unsigned>(std::min<std::size_t>(size - done, 1u << 30));
      const int n = gzread(file_, bytes + done, chunk);
      if (n < 0) throw StorageError(fmt::format("IDX file {}: cannot read it: {}", path_.string(), error_text()));
      if (n == 0) {
        // A gzip stream cut short reads as an early end with Z_BUF_ERROR: report it as truncation.
        int code = Z_OK;
        gzerror(file_, &code);
        if (code != Z_OK && code != Z_BUF_ERROR) {
          throw StorageError(fmt::format("IDX file {}: cannot read it: {}", path_.string(), error_text()));
        }
        break;
      }
      done += static_cast<std::size_t>(n);
    }
    return done;
  }

 private:
  std::string error_text() const {
    int code = Z_OK;
    const char* text = gzerror(file_, &code);
    return code == Z_ERRNO ? std::strerror(errno) : text;
  }

  std::filesystem::path path_;
  gzFile file_;
};

// The first step of the data buffer's growth (read_idx_ubyte).
constexpr std::size_t kFirstReadBytes = std::size_t{1} << 20;

std::uint32_t big_endian_u32(const unsigned char* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
}

}  // namespace

IdxArray read_idx_ubyte(const std::filesystem::path& path, int dimensions) {
  if (dimensions < 1 || dimensions > 255)
    throw Error(fmt::format("read_idx_ubyte: dimensions {} out of range", dimensions));
  const std::string where = "IDX file " + path.string();
  GzReader in(path);
  unsigned char magic[4];
  if (in.read(magic, 4) != 4) throw StorageError(where + ": shorter than its 4-byte magic (empty or truncated)");
  const std::uint32_t expected = 0x0800u | static_cast<std::uint32_t>(dimensions);
  if (big_endian_u32(magic) != expected) {
    throw StorageError(
        fmt::format("{}: magic 0x{:08x}, expected 0x{:08x} (unsigned bytes, {} dimension{}); is it "
                    "the {} file of the pair and not compressed twice?",
                    where, big_endian_u32(magic), expected, dimensions, dimensions == 1 ? "" : "s",
                    dimensions == 1 ? "labels" : "images"));
  }
  IdxArray array;
  std::uint64_t elements = 1;
  for (int d = 0; d < dimensions; ++d) {
    unsigned char size[4];
    if (in.read(size, 4) != 4) throw StorageError(fmt::format("{}: truncated in its header (dimension {})", where, d));
    const std::uint32_t n = big_endian_u32(size);
    if (n == 0) throw StorageError(fmt::format("{}: dimension {} is 0", where, d));
    elements *= n;
    // A corrupt header must not make us allocate terabytes: the data sets of this format are
    // well under 4 GiB.
    if (elements > std::numeric_limits<std::uint32_t>::max()) {
      throw StorageError(fmt::format("{}: the header announces more than 2^32 bytes (corrupt header?)", where));
    }
    array.shape.push_back(static_cast<std::int64_t>(n));
  }
  // The buffer grows as data arrive instead of taking the announced size at once: a damaged
  // header (45 bytes announcing 600 MB, found by tests/fuzz idx_reader_fuzz) must cost no more
  // memory than the data the file really holds before it is reported as truncated. Doubling
  // keeps the copying linear.
  const auto total = static_cast<std::size_t>(elements);
  std::size_t got = 0;
  while (got < total) {
    const std::size_t want = std::min(total, std::max<std::size_t>(kFirstReadBytes, 2 * got));
    array.data.resize(want);
    got += in.read(array.data.data() + got, want - got);
    if (got < want) break;
  }
  if (got != total) {
    throw StorageError(fmt::format("{}: truncated: {} of the {} data bytes its header announces", where, got, total));
  }
  unsigned char extra;
  if (in.read(&extra, 1) != 0) {
    throw StorageError(fmt::format("{}: more bytes than the {} its header announces (corrupt or not an IDX file)",
                                   where, array.data.size()));
  }
  return array;
}

}  // namespace tenax::sdk
