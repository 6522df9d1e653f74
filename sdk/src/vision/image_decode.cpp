// PNG (libpng) and JPEG (libjpeg-turbo) decoding into 8-bit RGB with the transformations
// Pillow's Image.convert("RGB") amounts to. Both libraries report errors by longjmp, so each
// decoder's library calls sit in one function whose state is all its caller's (read_png,
// read_jpeg): a longjmp leaves no local of theirs indeterminate and skips no destructor.
#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include <jpeglib.h>
#include <jerror.h>
#include <png.h>

#include "tenax/core/error.h"
#include "tenax/core/files.h"
#include "tenax/sdk/vision/image.h"

namespace tenax::sdk {
namespace {

// Pillow's decompression-bomb limit: Image.open refuses an image of more than twice
// Image.MAX_IMAGE_PIXELS (1024^3 / 4 / 3) pixels with DecompressionBombError. The same limit here
// means a damaged or hostile header (a 647-byte JPEG announcing 64,272 x 16,160 pixels, found by
// tests/fuzz image_decoder_fuzz) is an error naming the file, not a 3 GB allocation.
constexpr std::uint64_t kMaxImagePixels = 2 * (std::uint64_t{1} << 30) / 4 / 3;

// Deflate expands at most 1032-fold, and every pixel of a PNG takes at least one bit of the
// inflated data; a header announcing more pixels than the file's bytes can carry is damaged.
constexpr std::uint64_t kMaxPngPixelsPerByte = 8 * 1032;

// Formats the size check's message into `message`; false when `width` x `height` is refused.
bool plausible_size(std::uint64_t width, std::uint64_t height, char* message, std::size_t size) {
  if (width * height <= kMaxImagePixels) return true;
  std::snprintf(message, size,
                "%llu x %llu pixels is over the limit of %llu (Pillow's decompression-bomb limit; Pillow refuses "
                "it too): a damaged header, or not an image to decode whole",
                static_cast<unsigned long long>(width), static_cast<unsigned long long>(height),
                static_cast<unsigned long long>(kMaxImagePixels));
  return false;
}

struct PngSource {
  const std::uint8_t* data;
  std::size_t size;
  std::size_t offset;
};

struct PngError {
  std::jmp_buf jump;
  char message[200];
};

void png_read_from_memory(png_structp png, png_bytep out, png_size_t length) {
  auto* source = static_cast<PngSource*>(png_get_io_ptr(png));
  if (source->offset + length > source->size) png_error(png, "truncated file");
  std::memcpy(out, source->data + source->offset, length);
  source->offset += length;
}

void png_on_error(png_structp png, png_const_charp message) {
  auto* error = static_cast<PngError*>(png_get_error_ptr(png));
  std::snprintf(error->message, sizeof error->message, "%s", message);
  std::longjmp(error->jump, 1);
}

void png_on_warning(png_structp, png_const_charp) {}  // Pillow ignores them too

// The libpng calls, under setjmp. Everything they change lives in the caller's frame and is
// reached through pointers, so nothing this frame holds is left indeterminate by a longjmp.
// Returns false (error->message set) when libpng failed.
bool read_png(png_structp png, png_infop info, PngSource* source, Image* image, std::vector<png_bytep>* rows,
              PngError* error) {
  if (setjmp(error->jump)) return false;
  png_set_read_fn(png, source, png_read_from_memory);
  png_read_info(png, info);
  {
    // libpng allows up to 1,000,000 x 1,000,000; refuse before allocating.
    const std::uint64_t width = png_get_image_width(png, info);
    const std::uint64_t height = png_get_image_height(png, info);
    if (!plausible_size(width, height, error->message, sizeof error->message)) return false;
    if (width * height > kMaxPngPixelsPerByte * source->size) {
      std::snprintf(error->message, sizeof error->message,
                    "IHDR announces %llu x %llu pixels, more than %zu bytes of PNG can hold (a damaged header)",
                    static_cast<unsigned long long>(width), static_cast<unsigned long long>(height), source->size);
      return false;
    }
  }
  // To 8-bit RGB as Pillow's convert("RGB"): palettes and low bit depths expanded, 16 bits
  // reduced, gray replicated, alpha dropped; no gamma transformation.
  png_set_expand(png);
  png_set_strip_16(png);
  png_set_gray_to_rgb(png);
  png_set_strip_alpha(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  image->width = png_get_image_width(png, info);
  image->height = png_get_image_height(png, info);
  if (png_get_rowbytes(png, info) != static_cast<std::size_t>(image->width) * 3) {
    png_error(png, "unexpected row size after conversion to RGB");
  }
  image->rgb.resize(static_cast<std::size_t>(image->width * image->height * 3));
  rows->resize(static_cast<std::size_t>(image->height));
  for (std::int64_t y = 0; y < image->height; ++y) {
    (*rows)[static_cast<std::size_t>(y)] = &image->rgb[static_cast<std::size_t>(y * image->width * 3)];
  }
  png_read_image(png, rows->data());
  png_read_end(png, nullptr);
  return true;
}

Image decode_png(const std::string& bytes, const std::string& where) {
  PngError error{};
  PngSource source{reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), 0};
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &error, png_on_error, png_on_warning);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (png == nullptr || info == nullptr) {
    png_destroy_read_struct(&png, &info, nullptr);
    throw StorageError(where + ": cannot set up the PNG decoder (out of memory)");
  }
  Image image;
  std::vector<png_bytep> rows;
  const bool ok = read_png(png, info, &source, &image, &rows, &error);
  png_destroy_read_struct(&png, &info, nullptr);
  if (!ok) throw StorageError(where + ": not a readable PNG: " + error.message);
  return image;
}

struct JpegError {
  jpeg_error_mgr manager;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  bool truncated;
};

// libjpeg only warns at a premature end of data and pads the image with grey; Pillow refuses
// such a file ("image file is truncated"), and so do we. Other warnings Pillow ignores too.
void jpeg_on_message(j_common_ptr cinfo, int level) {
  auto* error = reinterpret_cast<JpegError*>(cinfo->err);
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) error->truncated = true;
}

void jpeg_on_error(j_common_ptr cinfo) {
  auto* error = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, error->message);
  std::longjmp(error->jump, 1);
}

// The libjpeg calls, under setjmp; as read_png, all state is the caller's, through pointers.
bool read_jpeg(jpeg_decompress_struct* cinfo, JpegError* error, const std::string* bytes, Image* image) {
  if (setjmp(error->jump)) return false;
  jpeg_create_decompress(cinfo);
  jpeg_mem_src(cinfo, reinterpret_cast<const unsigned char*>(bytes->data()), static_cast<unsigned long>(bytes->size()));
  jpeg_read_header(cinfo, TRUE);
  if (cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK) {
    std::snprintf(error->message, sizeof error->message, "CMYK JPEGs are not supported (convert it to RGB first)");
    return false;
  }
  if (!plausible_size(cinfo->image_width, cinfo->image_height, error->message, sizeof error->message)) return false;
  // libjpeg's defaults are Pillow's: islow IDCT, fancy upsampling; gray is replicated to RGB.
  cinfo->out_color_space = JCS_RGB;
  jpeg_start_decompress(cinfo);
  image->width = cinfo->output_width;
  image->height = cinfo->output_height;
  // The pixels are reserved (address space, at most 537 MB under the limit) but written, and so
  // backed by memory, row by row, and decoding stops at the end of the data: a truncated file
  // with a large header costs the rows it holds, not the whole announced image.
  const auto row_bytes = static_cast<std::size_t>(image->width) * 3;
  image->rgb.reserve(row_bytes * static_cast<std::size_t>(image->height));
  while (cinfo->output_scanline < cinfo->output_height) {
    const std::size_t end = (static_cast<std::size_t>(cinfo->output_scanline) + 1) * row_bytes;
    image->rgb.resize(end);
    JSAMPROW row = &image->rgb[end - row_bytes];
    jpeg_read_scanlines(cinfo, &row, 1);
    if (error->truncated) {
      std::snprintf(error->message, sizeof error->message, "the file is truncated (premature end of JPEG data)");
      return false;
    }
  }
  jpeg_finish_decompress(cinfo);
  return true;
}

Image decode_jpeg(const std::string& bytes, const std::string& where) {
  jpeg_decompress_struct cinfo{};
  JpegError error{};
  cinfo.err = jpeg_std_error(&error.manager);
  error.manager.error_exit = jpeg_on_error;
  error.manager.emit_message = jpeg_on_message;
  Image image;
  const bool ok = read_jpeg(&cinfo, &error, &bytes, &image);
  jpeg_destroy_decompress(&cinfo);  // also after a failure part-way (a no-op before create)
  if (!ok) throw StorageError(where + ": not a readable JPEG: " + error.message);
  return image;
}

}  // namespace

Image decode_image(const std::string& bytes, const std::string& where) {
  static const unsigned char kPng[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (bytes.size() >= sizeof kPng && std::memcmp(bytes.data(), kPng, sizeof kPng) == 0) {
    return decode_png(bytes, where);
  }
  if (bytes.size() >= 3 && static_cast<unsigned char>(bytes[0]) == 0xff &&
      static_cast<unsigned char>(bytes[1]) == 0xd8 && static_cast<unsigned char>(bytes[2]) == 0xff) {
    return decode_jpeg(bytes, where);
  }
  throw StorageError(where + ": neither a PNG nor a JPEG file (by its first bytes)");
}

Image decode_image(const std::filesystem::path& path) {
  if (!std::filesystem::is_regular_file(path)) throw StorageError(path.string() + ": no such image file");
  return decode_image(files::read_all(path), path.string());
}

}  // namespace tenax::sdk
