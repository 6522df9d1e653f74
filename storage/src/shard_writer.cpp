#include "tenax/storage/shard_writer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <system_error>

#include "hdf5_handle.h"
#include "json_fields.h"
#include "region_writer.h"
#include "shape_bytes.h"
#include "tenax/core/checksum.h"
#include "tenax/core/error.h"
#include "tenax/core/files.h"
#include "tenax/core/logging.h"
#include "tenax/core/trace_point.h"
#include "tenax/core/unique_fd.h"

namespace tenax::storage {
namespace {

using detail::H5Handle;

// Thrown inside write_shard only; becomes the returned Status.
struct WriteFailure {
  Status status;
};

[[noreturn]] void fail(StatusCode code, const std::filesystem::path& file, const std::string& tensor,
                       const std::string& what) {
  std::string message = file.string() + ": ";
  if (!tensor.empty()) message += "tensor '" + tensor + "': ";
  message += what;
  throw WriteFailure{Status(code, message)};
}

// An HDF5 call failed: report with HDF5's own explanation (which carries errno text such as
// "No space left on device"). Failures of file-level I/O are the environment's fault.
[[noreturn]] void fail_hdf5(StatusCode code, const std::filesystem::path& file, const std::string& tensor,
                            const std::string& call) {
  const std::string cause = detail::error_text();
  fail(code, file, tensor, call + " failed" + (cause.empty() ? "" : " (" + cause + ")"));
}

H5Handle make_string_type(std::size_t length) {
  H5Handle t = detail::datatype_handle(H5Tcopy(H5T_C_S1));
  if (!t.valid() || H5Tset_size(t.get(), length == 0 ? 1 : length) < 0 || H5Tset_strpad(t.get(), H5T_STR_NULLPAD) < 0) {
    return H5Handle();
  }
  return t;
}

void write_string_attribute(hid_t object, const char* attr_name, const std::string& value,
                            const std::filesystem::path& file, const std::string& tensor) {
  H5Handle type = make_string_type(value.size());
  if (!type.valid()) fail_hdf5(StatusCode::kInternal, file, tensor, "string type");
  H5Handle space = detail::dataspace_handle(H5Screate(H5S_SCALAR));
  if (!space.valid()) fail_hdf5(StatusCode::kInternal, file, tensor, "H5Screate");
  H5Handle attr =
      detail::attribute_handle(H5Acreate2(object, attr_name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT));
  if (!attr.valid()) fail_hdf5(StatusCode::kFailedPrecondition, file, tensor, std::string("H5Acreate2 ") + attr_name);
  const std::string padded = value.empty() ? std::string(1, '\0') : value;
  if (H5Awrite(attr.get(), type.get(), padded.data()) < 0) {
    fail_hdf5(StatusCode::kFailedPrecondition, file, tensor, std::string("H5Awrite ") + attr_name);
  }
  if (attr.close() < 0) fail_hdf5(StatusCode::kFailedPrecondition, file, tensor, "H5Aclose");
}

void write_shape_attribute(hid_t object, const std::vector<std::int64_t>& shape, const std::filesystem::path& file,
                           const std::string& tensor) {
  // A scalar's shape is []: a null dataspace (h5py reads it as an empty value).
  const hsize_t rank = shape.size();
  H5Handle space = detail::dataspace_handle(shape.empty() ? H5Screate(H5S_NULL) : H5Screate_simple(1, &rank, nullptr));
  if (!space.valid()) fail_hdf5(StatusCode::kInternal, file, tensor, "H5Screate (shape)");
  H5Handle attr =
      detail::attribute_handle(H5Acreate2(object, "shape", H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT));
  if (!attr.valid()) fail_hdf5(StatusCode::kFailedPrecondition, file, tensor, "H5Acreate2 shape");
  if (!shape.empty() && H5Awrite(attr.get(), H5T_NATIVE_INT64, shape.data()) < 0) {
    fail_hdf5(StatusCode::kFailedPrecondition, file, tensor, "H5Awrite shape");
  }
  if (attr.close() < 0) fail_hdf5(StatusCode::kFailedPrecondition, file, tensor, "H5Aclose");
}

// Creates the tensor's dataset with its space allocated now and never filled: HDF5 writes only
// the metadata, write_regions() the bytes, at the offset recorded here.
IndexEntry create_dataset(hid_t h5file, hid_t lcpl, hid_t dcpl, const TensorRef& t, const std::string& shard,
                          const std::filesystem::path& file) {
  H5Handle type = detail::make_datatype(t.dtype);
  if (!type.valid()) fail_hdf5(StatusCode::kInternal, file, t.name, "datatype");

  std::vector<hsize_t> dims(t.shape.begin(), t.shape.end());
  H5Handle space = detail::dataspace_handle(
      dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  if (!space.valid()) fail_hdf5(StatusCode::kInternal, file, t.name, "H5Screate");

  // Contiguous layout, no filters: the bytes on disk are the tensor's bytes, so our own
  // checksum covers them end to end.
  H5Handle dset =
      detail::dataset_handle(H5Dcreate2(h5file, t.name.c_str(), type.get(), space.get(), lcpl, dcpl, H5P_DEFAULT));
  if (!dset.valid()) fail_hdf5(StatusCode::kFailedPrecondition, file, t.name, "H5Dcreate2");

  IndexEntry entry;
  if (t.nbytes > 0) {
    // Contiguous storage allocated at creation (H5D_ALLOC_TIME_EARLY) never moves afterwards.
    const haddr_t address = H5Dget_offset(dset.get());
    if (address == HADDR_UNDEF) fail_hdf5(StatusCode::kInternal, file, t.name, "H5Dget_offset");
    entry.offset = static_cast<std::uint64_t>(address);
  }
  entry.name = t.name;
  entry.shard = shard;
  entry.dtype = t.dtype;
  entry.shape = t.shape;
  entry.nbytes = t.nbytes;
  entry.checksum = xxh3_64(t.nbytes > 0 ? t.data : "", t.nbytes);

  write_string_attribute(dset.get(), "dtype", dtype_name(t.dtype), file, t.name);
  write_shape_attribute(dset.get(), t.shape, file, t.name);
  write_string_attribute(dset.get(), "xxh3", checksum_hex(entry.checksum), file, t.name);
  if (dset.close() < 0) fail_hdf5(StatusCode::kFailedPrecondition, file, t.name, "H5Dclose");
  return entry;
}

void validate(const std::vector<TensorRef>& tensors, const std::filesystem::path& file) {
  std::set<std::string> seen;
  for (const TensorRef& t : tensors) {
    if (!detail::is_valid_tensor_name(t.name)) {
      fail(StatusCode::kFailedPrecondition, file, t.name,
           "invalid name (empty, leading/trailing '/', or an empty, '.' or '..' component)");
    }
    if (!seen.insert(t.name).second) {
      fail(StatusCode::kFailedPrecondition, file, t.name, "name appears twice in this shard");
    }
    if (t.shape.size() > 32) fail(StatusCode::kFailedPrecondition, file, t.name, "more than 32 dimensions");
    const auto expected = detail::shape_nbytes(t.dtype, t.shape);
    if (!expected) {
      fail(StatusCode::kFailedPrecondition, file, t.name, "negative dimension or size overflow");
    }
    if (*expected != t.nbytes) {
      fail(StatusCode::kFailedPrecondition, file, t.name,
           "nbytes " + std::to_string(t.nbytes) + " does not match shape and dtype " + dtype_name(t.dtype) + " (" +
               std::to_string(*expected) + " bytes)");
    }
    if (t.nbytes > 0 && t.data == nullptr) {
      fail(StatusCode::kFailedPrecondition, file, t.name, "data is null");
    }
  }
}

// Room for HDF5's own metadata beside the tensor bytes (superblock, groups, object headers,
// attributes; about 1 KiB per dataset with our three attributes) and the alignment of large
// datasets. Running short only leaves the last few KiB unreserved; running long only costs a
// trim.
std::uint64_t space_estimate(const std::vector<TensorRef>& tensors) {
  std::uint64_t bytes = 16 * 1024;
  for (const TensorRef& t : tensors) bytes += t.nbytes + 2048 + detail::kDirectIoAlignment;
  return bytes;
}

// A failed write or flush leaves HDF5's file object half-closed: closing it fails again, a
// second close crashes inside HDF5, and the open descriptor pins the (unlinked) file's space.
// Two defences:
//  1. reserve_space(): the shard's blocks are allocated (fallocate) before HDF5 writes any
//     tensor, so ENOSPC, EDQUOT and EFBIG — the usual disk faults — surface here;
//  2. abandon(): for whatever still fails (EIO, ...), HDF5's descriptor is swapped for an
//     anonymous in-memory file, so that the one H5Fclose succeeds and the disk file is free.
void reserve_space(const std::filesystem::path& file, std::uint64_t bytes) {
  UniqueFd fd(::open(file.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) fail(StatusCode::kFailedPrecondition, file, "", std::string("cannot open: ") + std::strerror(errno));
  const int rc = ::fallocate(fd.get(), 0, 0, static_cast<off_t>(bytes));
  const int err = errno;
  fd.reset();
  if (rc == 0 || err == EOPNOTSUPP || err == ENOSYS) return;  // no reservation on this file system
  fail(StatusCode::kFailedPrecondition, file, "",
       "cannot reserve " + std::to_string(bytes) + " bytes for the shard: " + std::strerror(err));
}

void abandon(H5Handle& h5file) {
  if (!h5file.valid()) return;
  void* handle = nullptr;
  if (H5Fget_vfd_handle(h5file.get(), H5P_DEFAULT, &handle) >= 0 && handle != nullptr) {
    const int fd = *static_cast<int*>(handle);
    const UniqueFd scratch(::memfd_create("tenax-abandoned-shard", MFD_CLOEXEC));
    if (scratch) ::dup2(scratch.get(), fd);
  }
  if (h5file.close() < 0) {
    logger("tenax.storage")->warn("HDF5 could not close an abandoned shard: {}", detail::error_text());
  }
  detail::error_text();  // clear the stack
}

std::uint64_t file_size_of(const std::filesystem::path& file) {
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(file, ec);
  if (ec) throw StorageError("cannot stat " + file.string() + ": " + ec.message());
  return size;
}

// The tensors' bytes and where they go in the file (create_dataset recorded where).
std::vector<detail::Region> regions_of(const ShardInfo& info, const std::vector<TensorRef>& tensors) {
  std::vector<detail::Region> regions;
  regions.reserve(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (info.tensors[i].offset) regions.push_back({*info.tensors[i].offset, tensors[i].data, tensors[i].nbytes});
  }
  return regions;
}

ShardInfo write_shard_or_throw(const std::filesystem::path& file, const std::vector<TensorRef>& tensors) {
  validate(tensors, file);
  detail::silence_errors();
  trace_point("save.shard.begin", 0);

  ShardInfo info;
  info.file = file.filename().string();
  {
    H5Handle fapl = detail::make_strong_fapl();
    // Every dataset of a block or more starts on a block boundary, so write_regions can send
    // its bytes with O_DIRECT.
    if (!fapl.valid() || H5Pset_alignment(fapl.get(), detail::kDirectIoAlignment, detail::kDirectIoAlignment) < 0) {
      fail_hdf5(StatusCode::kInternal, file, "", "file access properties");
    }
    H5Handle h5file = detail::file_handle(H5Fcreate(file.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()));
    if (!h5file.valid()) fail_hdf5(StatusCode::kFailedPrecondition, file, "", "H5Fcreate");
    try {
      reserve_space(file, space_estimate(tensors));
      H5Handle lcpl = detail::plist_handle(H5Pcreate(H5P_LINK_CREATE));
      if (!lcpl.valid() || H5Pset_create_intermediate_group(lcpl.get(), 1) < 0) {
        fail_hdf5(StatusCode::kInternal, file, "", "link creation properties");
      }
      H5Handle dcpl = detail::plist_handle(H5Pcreate(H5P_DATASET_CREATE));
      if (!dcpl.valid() || H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY) < 0 ||
          H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER) < 0) {
        fail_hdf5(StatusCode::kInternal, file, "", "dataset creation properties");
      }
      info.tensors.reserve(tensors.size());
      for (const TensorRef& t : tensors) {
        info.tensors.push_back(create_dataset(h5file.get(), lcpl.get(), dcpl.get(), t, info.file, file));
      }
      // The flush writes the metadata: this is where ENOSPC often shows up.
      // It comes before H5Fclose so that a failure still leaves us the file's identifier.
      if (H5Fflush(h5file.get(), H5F_SCOPE_GLOBAL) < 0) {
        fail_hdf5(StatusCode::kFailedPrecondition, file, "", "H5Fflush");
      }
      hsize_t logical_size = 0;
      if (H5Fget_filesize(h5file.get(), &logical_size) < 0) {
        fail_hdf5(StatusCode::kInternal, file, "", "H5Fget_filesize");
      }
      if (h5file.close() < 0) fail_hdf5(StatusCode::kFailedPrecondition, file, "", "H5Fclose");
      // The reservation may have left the file longer than HDF5's image: trim it.
      if (::truncate(file.c_str(), static_cast<off_t>(logical_size)) != 0) {
        fail(StatusCode::kFailedPrecondition, file, "", std::string("cannot trim: ") + std::strerror(errno));
      }
    } catch (const WriteFailure&) {
      abandon(h5file);
      throw;
    }
  }

  try {
    // The tensors' bytes, then the fsync of them and HDF5's metadata. The whole-file checksum
    // comes out of the same pass: it takes the tensor bytes as they go out and reads back only
    // the metadata.
    trace_point("save.shard.laid_out", 0);
    const detail::FileDigest digest = detail::write_regions(file, file_size_of(file), regions_of(info, tensors));
    trace_point("save.shard.data_written", 0);
    files::fsync_file(file);
    info.bytes = digest.bytes;
    info.checksum = digest.checksum;
  } catch (const StorageError& e) {
    fail(StatusCode::kFailedPrecondition, file, "", e.what());
  }
  return info;
}

}  // namespace

StatusOr<ShardInfo> write_shard(const std::filesystem::path& file, const std::vector<TensorRef>& tensors) {
  try {
    return write_shard_or_throw(file, tensors);
  } catch (const WriteFailure& failure) {
    // A partial shard is useless and may be what filled the disk.
    std::error_code ignored;
    std::filesystem::remove(file, ignored);
    logger("tenax.storage")->warn("shard write failed: {}", failure.status.message());
    return failure.status;
  }
}

nlohmann::json to_json(const ShardInfo& info) {
  nlohmann::json tensors = nlohmann::json::array();
  for (const IndexEntry& entry : info.tensors) {
    nlohmann::json e = detail::entry_to_json(entry);
    e["name"] = entry.name;
    tensors.push_back(std::move(e));
  }
  return nlohmann::json{{"file", info.file},
                        {"bytes", info.bytes},
                        {"checksum", checksum_hex(info.checksum)},
                        {"tensors", std::move(tensors)}};
}

StatusOr<ShardInfo> shard_info_from_json(const nlohmann::json& json) {
  try {
    ShardInfo info;
    info.file = detail::get_string(json, "file", "");
    if (!detail::is_plain_file_name(info.file)) {
      throw detail::FieldError("file: not a plain file name");
    }
    info.bytes = detail::get_uint64(json, "bytes", "");
    info.checksum = detail::get_checksum(json, "checksum", "");
    const nlohmann::json& tensors = detail::field(json, "tensors", "");
    if (!tensors.is_array()) throw detail::FieldError("tensors: expected an array");
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const std::string path = "tensors[" + std::to_string(i) + "]";
      IndexEntry entry = detail::entry_from_json(tensors[i], detail::get_string(tensors[i], "name", path), path);
      if (entry.shard != info.file) {
        throw detail::FieldError(path + ".shard: \"" + entry.shard + "\" is not this shard's file");
      }
      info.tensors.push_back(std::move(entry));
    }
    return info;
  } catch (const detail::FieldError& e) {
    return Status(StatusCode::kDataLoss, std::string("shard info: ") + e.what());
  } catch (const nlohmann::json::exception& e) {
    return Status(StatusCode::kDataLoss, std::string("shard info: ") + e.what());
  }
}

}  // namespace tenax::storage
