// libFuzzer target for the safetensors reader (storage/src/safetensors_reader.cpp):
// read_safetensors, the call PretrainedModel::load_weights makes on a Hugging Face directory's
// model.safetensors, over a file holding the input bytes as they are.
//
// The contract under test (safetensors.h): arbitrary bytes never crash, leak, hit undefined
// behaviour or throw; every fault comes back as kDataLoss (malformed) or kFailedPrecondition (a
// valid dtype Tenax has no DType for), its message starting with the path; and a file read OK is
// self-consistent:
//   - tensors sorted by name, unique, none called "__metadata__";
//   - each nbytes is product(shape) * dtype size, and the tensors tile the data region (the
//     bytes after the 8-byte length and the header) exactly, in offset order;
//   - data(e), find(name) and read(name) give the entry's bytes, which are the input's bytes at
//     that place; read() of an absent name is kNotFound;
//   - write_safetensors of what was read succeeds, and reading that back gives the same metadata
//     and tensors (what the reader accepts, save_pretrained can write).
// A violation aborts with a message (scratch_file.h), so libFuzzer records the input and the
// corpus replay in `make test` fails.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/scratch_file.h"
#include "tenax/core/status.h"
#include "tenax/storage/safetensors.h"

namespace tenax::storage::fuzz {
namespace {

constexpr const char* kTarget = "safetensors_reader_fuzz";

void expect(bool holds, const std::string& what) {
  if (!holds) tenax::fuzz::violated(kTarget, what);
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

// product(shape) * dtype_size, or false on overflow or a negative dimension; computed here
// rather than with the reader's helper so that the check is independent of it.
bool expected_nbytes(const SafetensorsEntry& e, std::uint64_t* out) {
  std::uint64_t total = dtype_size(e.dtype);
  for (std::int64_t d : e.shape) {
    if (d < 0 || __builtin_mul_overflow(total, static_cast<std::uint64_t>(d), &total)) return false;
  }
  *out = total;
  return true;
}

void check_file(const SafetensorsFile& file, std::string_view input, const std::string& where) {
  expect(file.source() == where, "source() is '" + file.source() + "', not the path");
  std::uint64_t header = 0;
  for (int i = 7; i >= 0; --i) {
    header = (header << 8) | static_cast<unsigned char>(input[static_cast<std::size_t>(i)]);
  }
  expect(header <= input.size() - 8, "accepted a header length past the end of the file");
  const std::uint64_t data_start = 8 + header;
  const std::uint64_t data_size = input.size() - data_start;

  const std::vector<SafetensorsEntry>& tensors = file.tensors();
  std::vector<const SafetensorsEntry*> by_offset;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const SafetensorsEntry& e = tensors[i];
    expect(e.name != "__metadata__", "a tensor is called __metadata__");
    expect(i == 0 || tensors[i - 1].name < e.name, "tensors not sorted by unique name at '" + e.name + "'");
    std::uint64_t nbytes = 0;
    expect(expected_nbytes(e, &nbytes) && nbytes == e.nbytes,
           "tensor '" + e.name + "': nbytes disagrees with dtype x shape");
    by_offset.push_back(&e);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](const SafetensorsEntry* a, const SafetensorsEntry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->nbytes < b->nbytes;
  });
  std::uint64_t next = 0;
  for (const SafetensorsEntry* e : by_offset) {
    expect(e->begin == next, "tensor '" + e->name + "' does not start where the previous one ended");
    next = e->begin + e->nbytes;
    expect(next >= e->begin && next <= data_size, "tensor '" + e->name + "' ends past the data region");
  }
  expect(next == data_size, "the tensors do not cover the data region");

  for (const SafetensorsEntry& e : tensors) {
    expect(file.find(e.name) == &e, "find('" + e.name + "') does not return its entry");
    const std::uint8_t* at = file.data(e);
    expect(
        e.nbytes == 0 || std::memcmp(at, input.data() + data_start + e.begin, static_cast<std::size_t>(e.nbytes)) == 0,
        "data('" + e.name + "') is not the file's bytes at its offsets");
    const StatusOr<TensorData> read = file.read(e.name);
    expect(read.is_ok(), "read('" + e.name + "') of a listed tensor failed: " + read.status().to_string());
    const TensorData& t = read.value();
    expect(t.dtype == e.dtype && t.shape == e.shape && t.bytes.size() == e.nbytes &&
               (e.nbytes == 0 || std::memcmp(t.bytes.data(), at, t.bytes.size()) == 0),
           "read('" + e.name + "') differs from its entry");
  }
  const std::string absent = "\x01no such tensor";
  if (file.find(absent) == nullptr) {
    const StatusOr<TensorData> none = file.read(absent);
    expect(!none.is_ok() && none.status().code() == StatusCode::kNotFound,
           "read() of an absent tensor is not kNotFound");
  }
}

// What was read writes back (the path save_pretrained takes) and reads back the same.
void check_round_trip(const SafetensorsFile& file, const tenax::fuzz::ScratchFile& scratch) {
  std::vector<TensorRef> refs;
  for (const SafetensorsEntry& e : file.tensors()) refs.push_back(file.ref(e));
  const auto path = scratch.dir() / "written.safetensors";
  const Status written = write_safetensors(path, refs, file.metadata());
  expect(written.is_ok(), "write_safetensors refuses what read_safetensors accepted: " + written.to_string());
  const StatusOr<SafetensorsFile> again = read_safetensors(path);
  expect(again.is_ok(), "the rewritten file does not read back: " + again.status().to_string());
  const SafetensorsFile& back = again.value();
  expect(back.metadata() == file.metadata(), "metadata changed in a write/read round trip");
  expect(back.tensors().size() == file.tensors().size(), "tensor count changed in a round trip");
  for (std::size_t i = 0; i < file.tensors().size(); ++i) {
    const SafetensorsEntry& a = file.tensors()[i];
    const SafetensorsEntry& b = back.tensors()[i];
    expect(a.name == b.name && a.dtype == b.dtype && a.shape == b.shape && a.nbytes == b.nbytes &&
               (a.nbytes == 0 || std::memcmp(file.data(a), back.data(b), static_cast<std::size_t>(a.nbytes)) == 0),
           "tensor '" + a.name + "' changed in a write/read round trip");
  }
}

void fuzz_one(std::string_view input) {
  static const tenax::fuzz::ScratchFile scratch(kTarget, "model.safetensors");
  const auto& path = scratch.write(input);
  const StatusOr<SafetensorsFile> file = read_safetensors(path);
  if (!file.is_ok()) {
    const Status& s = file.status();
    expect(s.code() == StatusCode::kDataLoss || s.code() == StatusCode::kFailedPrecondition,
           "read_safetensors returned an undocumented status: " + s.to_string());
    expect(starts_with(s.message(), path.string() + ": "), "error does not name the file: " + s.message());
    return;
  }
  check_file(file.value(), input, path.string());
  check_round_trip(file.value(), scratch);
}

}  // namespace
}  // namespace tenax::storage::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  tenax::storage::fuzz::fuzz_one(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
