// The safetensors writer: header layout identical to the Rust crate's `serialize`, and an
// atomic, durable write.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>
#include <utility>

#include "shape_bytes.h"
#include "tenax/core/error.h"
#include "tenax/core/files.h"
#include "tenax/core/unique_fd.h"
#include "tenax/storage/safetensors.h"

namespace tenax::storage {
namespace fs = std::filesystem;

namespace {

constexpr const char* kMetadataKey = "__metadata__";

// The crate sorts by its Dtype enum, descending; for Tenax's dtypes that enum order is
// U8 < F16 < BF16 < F32 < F64 < I64. Largest element first keeps every tensor aligned to its element
// size (the header length is a multiple of 8).
int crate_order(DType dtype) {
  switch (dtype) {
    case DType::kUInt8: return 0;
    case DType::kFloat16: return 1;
    case DType::kBFloat16: return 2;
    case DType::kFloat32: return 3;
    case DType::kFloat64: return 4;
    case DType::kInt64: return 5;
  }
  return 0;
}

Status invalid(const fs::path& path, const std::string& tensor, const std::string& what) {
  std::string message = path.string() + ": ";
  if (!tensor.empty()) message += "tensor '" + tensor + "': ";
  return Status(StatusCode::kInvalidArgument, message + what);
}

Status io_failure(const std::string& what, const fs::path& path, int err) {
  return Status(StatusCode::kFailedPrecondition, what + " " + path.string() + ": " + std::strerror(err));
}

// The header JSON, unpadded, in the crate's key order. Throws nlohmann::json::type_error for a
// string that is not valid UTF-8.
std::string header_json(const std::vector<const TensorRef*>& ordered,
                        const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
    header[kMetadataKey] = std::move(meta);
  }
  std::uint64_t offset = 0;
  for (const TensorRef* t : ordered) {
    const std::uint64_t end = offset + t->nbytes;
    header[t->name] = nlohmann::ordered_json{
        {"dtype", safetensors_dtype_name(t->dtype)}, {"shape", t->shape}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  return header.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::strict);
}

// Writes everything, retrying on EINTR and short writes; returns errno or 0.
int write_all(int fd, const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return 0;
}

// Writes the file into `fd` (a new temporary file at `tmp`), fsyncs, closes.
Status write_file(UniqueFd fd, const fs::path& tmp, const std::string& prefix,
                  const std::vector<const TensorRef*>& ordered) {
  if (int err = write_all(fd.get(), prefix.data(), prefix.size())) {
    return io_failure("write failed for", tmp, err);
  }
  for (const TensorRef* t : ordered) {
    if (t->nbytes == 0) continue;
    if (int err = write_all(fd.get(), t->data, t->nbytes)) {
      return io_failure("write failed for", tmp, err);
    }
  }
  if (::fsync(fd.get()) != 0) return io_failure("fsync failed for", tmp, errno);
  if (const std::error_code ec = fd.close()) return io_failure("close failed for", tmp, ec.value());
  return Status::ok();
}

}  // namespace

const char* safetensors_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "F32";
    case DType::kFloat16: return "F16";
    case DType::kBFloat16: return "BF16";
    case DType::kInt64: return "I64";
    case DType::kUInt8: return "U8";
    case DType::kFloat64: return "F64";
  }
  return "?";
}

Status write_safetensors(const fs::path& path, const std::vector<TensorRef>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  std::set<std::string> names;
  std::vector<const TensorRef*> ordered;
  for (const TensorRef& t : tensors) {
    if (t.name == kMetadataKey) return invalid(path, t.name, "reserved name");
    if (!names.insert(t.name).second) return invalid(path, t.name, "name given twice");
    const auto expected = detail::shape_nbytes(t.dtype, t.shape);
    if (!expected) return invalid(path, t.name, "negative dimension or element count overflows");
    if (*expected != t.nbytes) {
      return invalid(path, t.name,
                     "nbytes " + std::to_string(t.nbytes) + " but dtype and shape need " + std::to_string(*expected));
    }
    if (t.nbytes > 0 && t.data == nullptr) return invalid(path, t.name, "no data");
    ordered.push_back(&t);
  }
  std::sort(ordered.begin(), ordered.end(), [](const TensorRef* a, const TensorRef* b) {
    const int ka = crate_order(a->dtype), kb = crate_order(b->dtype);
    return ka != kb ? ka > kb : a->name < b->name;
  });

  std::string header;
  try {
    header = header_json(ordered, metadata);
  } catch (const nlohmann::json::exception& e) {
    return invalid(path, "", std::string("a tensor name or metadata string is not valid UTF-8 (") + e.what() + ")");
  }
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string prefix(8, '\0');
  for (int i = 0; i < 8; ++i) {
    prefix[static_cast<std::size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  }
  prefix += header;

  // A temporary file in the destination directory, so that the rename is atomic; unique per
  // process and call, so concurrent writers of the same path never share one.
  static std::atomic<std::uint64_t> counter{0};
  const fs::path tmp =
      path.string() + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!fd) return io_failure("cannot create", tmp, errno);
  Status status = write_file(std::move(fd), tmp, prefix, ordered);
  if (status.is_ok()) {
    try {
      files::durable_rename(tmp, path);
    } catch (const StorageError& e) {
      status = Status(StatusCode::kFailedPrecondition, e.what());
    }
  }
  if (!status.is_ok()) ::unlink(tmp.c_str());
  return status;
}

}  // namespace tenax::storage
