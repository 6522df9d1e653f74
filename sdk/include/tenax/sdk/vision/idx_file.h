// IDX files: the array format of MNIST and Fashion-MNIST (and KMNIST, EMNIST). A file is a
// 4-byte magic (two zero bytes, a type code, the number of dimensions), each dimension as a
// big-endian uint32, then the elements row-major. Only unsigned bytes (type 0x08) are read: the
// format those data sets use for images and labels. Gzip-compressed files (as Debian's
// dataset-fashion-mnist ships them, *-ubyte.gz) are read the same as plain ones (zlib).
// Files are untrusted input: the header is checked against what the caller expects and the
// payload against the size the header announces, before anything is used; the memory taken is
// bounded by the data the file really holds (at most about twice it), not by what the header
// announces.
// Thread-safety: a stateless function; an IdxArray is a plain value.
//
//   IdxArray images = read_idx_ubyte("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz", 3);
//   // images.shape == {60000, 28, 28}; images.data.size() == 60000 * 28 * 28
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace tenax::sdk {

/// The content of an unsigned-byte IDX file.
struct IdxArray {
  std::vector<std::int64_t> shape;  ///< the dimensions, outermost first
  std::vector<std::uint8_t> data;   ///< every element, row-major
};

/// Reads an unsigned-byte IDX file of `dimensions` dimensions (3 for images, 1 for labels),
/// gzip-compressed or not. Throws StorageError naming the file when it is missing or
/// unreadable, its magic is not 0x0000 08 `dimensions` (another type, another rank, not an IDX
/// file), a dimension is zero or the announced size is implausible (over 2^32 bytes), the data
/// end before the announced size (truncated), or bytes follow it.
IdxArray read_idx_ubyte(const std::filesystem::path& path, int dimensions);

}  // namespace tenax::sdk
