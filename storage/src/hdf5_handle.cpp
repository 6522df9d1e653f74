#include "hdf5_handle.h"

#include <atomic>
#include <cstdint>
#include <string>

namespace tenax::storage::detail {
namespace {

herr_t collect(unsigned /*n*/, const H5E_error2_t* err, void* client) {
  auto* out = static_cast<std::string*>(client);
  if (err == nullptr || err->desc == nullptr) return 0;
  if (!out->empty()) *out += "; ";
  if (err->func_name != nullptr) *out += std::string(err->func_name) + ": ";
  *out += err->desc;
  return 0;
}

// A custom little-endian IEEE-style float of 16 bits: sign at 15, exponent at `epos`.
H5Handle make_half(std::size_t epos, std::size_t esize, std::size_t msize, std::size_t ebias) {
  H5Handle t = datatype_handle(H5Tcopy(H5T_IEEE_F32LE));
  if (!t.valid()) return t;
  // Fields first (they fit the 32-bit precision), then shrink precision and size around them.
  if (H5Tset_fields(t.get(), 15, epos, esize, 0, msize) < 0 || H5Tset_offset(t.get(), 0) < 0 ||
      H5Tset_precision(t.get(), 16) < 0 || H5Tset_size(t.get(), 2) < 0 || H5Tset_ebias(t.get(), ebias) < 0) {
    return H5Handle();
  }
  return t;
}

// File-image callbacks that hand HDF5 the caller's buffer wherever it would allocate or copy
// the image (property-list set/copy, file open) and never free it. Read-only use only: HDF5
// asks for realloc only when it writes, which a read-only file never does.

void* image_malloc(std::size_t size, H5FD_file_image_op_t, void* udata) {
  auto* image = static_cast<FileImage*>(udata);
  return size == image->size ? image->data : nullptr;
}
void* image_memcpy(void* dest, const void* src, std::size_t size, H5FD_file_image_op_t, void* udata) {
  auto* image = static_cast<FileImage*>(udata);
  // Only "copies" of the borrowed image onto itself are expected.
  return dest == image->data && src == image->data && size == image->size ? dest : nullptr;
}
void* image_realloc(void*, std::size_t, H5FD_file_image_op_t, void*) { return nullptr; }
herr_t image_free(void*, H5FD_file_image_op_t, void*) { return 0; }
void* udata_copy(void* udata) { return udata; }
herr_t udata_free(void*) { return 0; }

}  // namespace

H5Handle open_image_read_only(FileImage& image) {
  H5Handle fapl = make_strong_fapl();
  H5FD_file_image_callbacks_t callbacks{&image_malloc, &image_memcpy, &image_realloc, &image_free,
                                        &udata_copy,   &udata_free,   &image};
  if (!fapl.valid() || H5Pset_fapl_core(fapl.get(), 64 * 1024, /*backing_store=*/0) < 0 ||
      H5Pset_file_image_callbacks(fapl.get(), &callbacks) < 0 ||
      H5Pset_file_image(fapl.get(), image.data, image.size) < 0) {
    return H5Handle();
  }
  // The name is only a label, but the core driver refuses one that exists on disk ("file
  // already exists") and identifies open files by it: so it can never exist (/dev/null is not
  // a directory) and is unique per open (two shards open at once are two files).
  static std::atomic<std::uint64_t> opened{0};
  const std::string label = "/dev/null/tenax-verified-image-" + std::to_string(opened.fetch_add(1));
  return file_handle(H5Fopen(label.c_str(), H5F_ACC_RDONLY, fapl.get()));
}

void silence_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

std::string error_text() {
  std::string text;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, &collect, &text);
  H5Eclear2(H5E_DEFAULT);
  return text;
}

H5Handle make_datatype(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return datatype_handle(H5Tcopy(H5T_IEEE_F32LE));
    case DType::kBFloat16: return make_half(7, 8, 7, 127);
    case DType::kFloat16: return make_half(10, 5, 10, 15);
    case DType::kInt64: return datatype_handle(H5Tcopy(H5T_STD_I64LE));
    case DType::kUInt8: return datatype_handle(H5Tcopy(H5T_STD_U8LE));
    case DType::kFloat64: return datatype_handle(H5Tcopy(H5T_IEEE_F64LE));
  }
  return H5Handle();
}

H5Handle make_strong_fapl() {
  H5Handle fapl = plist_handle(H5Pcreate(H5P_FILE_ACCESS));
  if (!fapl.valid() || H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG) < 0) return H5Handle();
  return fapl;
}

}  // namespace tenax::storage::detail
