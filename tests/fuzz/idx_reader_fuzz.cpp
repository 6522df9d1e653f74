// libFuzzer target for the IDX reader (sdk/src/vision/idx_file.cpp): read_idx_ubyte, the call
// IdxImageDataset makes on Fashion-MNIST's files, plain and gzip-compressed, over a file
// holding the input.
//
// An input is one mode byte, then a payload (idx_fuzz_input.h): the dimensions to ask for
// (1..4: labels are 1, images 3), and whether the harness gzips the payload before writing it,
// so that mutations of the IDX structure also reach the reader through zlib.
//
// The contract under test (idx_file.h): arbitrary bytes never crash, leak, hit undefined
// behaviour, hang or throw anything but StorageError, whose message names the file. And the
// reader agrees with an independent model of the format, whenever the harness knows the
// uncompressed bytes (gzip mode, or a payload that does not start with gzip's magic): it accepts
// exactly the files whose magic is 0x000008<dimensions>, whose dimensions are non-zero with a
// product under 2^32, and whose data are exactly that long; and then it returns those dimensions
// and those bytes. A violation aborts with a message (scratch_file.h).

#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/idx_fuzz_input.h"
#include "fuzz/scratch_file.h"
#include "tenax/core/error.h"
#include "tenax/sdk/vision/idx_file.h"

namespace tenax::sdk::fuzz {
namespace {

constexpr const char* kTarget = "idx_reader_fuzz";

void expect(bool holds, const std::string& what) {
  if (!holds) tenax::fuzz::violated(kTarget, what);
}

std::string gzip(std::string_view plain) {
  z_stream z{};
  // windowBits 15 + 16: a gzip wrapper, as gzip(1) and Debian's *-ubyte.gz files have.
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    tenax::fuzz::violated(kTarget, "deflateInit2 failed");
  }
  std::string out(deflateBound(&z, static_cast<uLong>(plain.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(plain.data()));
  z.avail_in = static_cast<uInt>(plain.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) tenax::fuzz::violated(kTarget, "deflate did not finish");
  return out;
}

std::uint32_t big_endian_u32(std::string_view bytes, std::size_t at) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
  return v;
}

// The format, as idx_file.h states it: the shape, or false when the file must be refused.
bool model_accepts(std::string_view plain, int dimensions, std::vector<std::int64_t>* shape) {
  const std::size_t header = 4 + 4 * static_cast<std::size_t>(dimensions);
  if (plain.size() < header) return false;
  if (big_endian_u32(plain, 0) != (0x0800u | static_cast<std::uint32_t>(dimensions))) return false;
  std::uint64_t elements = 1;
  for (int d = 0; d < dimensions; ++d) {
    const std::uint32_t n = big_endian_u32(plain, 4 + 4 * static_cast<std::size_t>(d));
    if (n == 0) return false;
    elements *= n;
    if (elements > std::numeric_limits<std::uint32_t>::max()) return false;
    shape->push_back(n);
  }
  return plain.size() - header == elements;
}

}  // namespace

}  // namespace tenax::sdk::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tenax::sdk::fuzz;
  static const tenax::fuzz::ScratchFile scratch(kTarget, "input-idx-ubyte");
  if (size == 0) return 0;
  const int dimensions = 1 + (data[0] & 3);
  const bool gzip_payload = (data[0] & kIdxGzipBit) != 0;
  const std::string_view payload(reinterpret_cast<const char*>(data) + 1, size - 1);
  const auto& path = scratch.write(gzip_payload ? std::string_view(gzip(payload)) : payload);

  // The bytes zlib hands the reader, when the harness knows them: a file without gzip's magic
  // is read as it is.
  const bool known = gzip_payload || payload.size() < 2 || static_cast<unsigned char>(payload[0]) != 0x1f ||
                     static_cast<unsigned char>(payload[1]) != 0x8b;
  std::vector<std::int64_t> shape;
  const bool valid = known && model_accepts(payload, dimensions, &shape);

  tenax::sdk::IdxArray array;
  try {
    array = tenax::sdk::read_idx_ubyte(path, dimensions);
  } catch (const tenax::StorageError& e) {
    expect(std::string(e.what()).find(path.string()) != std::string::npos,
           std::string("error does not name the file: ") + e.what());
    expect(!valid, std::string("refused a valid IDX file: ") + e.what());
    return 0;
  }
  // Accepted: consistent with itself, and with the model when the bytes are known.
  expect(array.shape.size() == static_cast<std::size_t>(dimensions), "wrong number of dimensions");
  std::uint64_t elements = 1;
  for (std::int64_t n : array.shape) {
    expect(n > 0, "a dimension is not positive");
    elements *= static_cast<std::uint64_t>(n);
  }
  expect(elements == array.data.size(), "data size is not the product of the shape");
  if (known) {
    expect(valid, "accepted a file the format refuses");
    expect(array.shape == shape, "shape differs from the header");
    const std::size_t header = 4 + 4 * static_cast<std::size_t>(dimensions);
    expect(array.data.empty() ? payload.size() == header
                              : std::memcmp(array.data.data(), payload.data() + header, array.data.size()) == 0,
           "data differ from the file's bytes");
  }
  return 0;
}
