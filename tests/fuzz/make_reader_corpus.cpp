// Writes the seed corpora of the reader fuzz targets, one directory per target:
//   safetensors_reader_fuzz/  files from the real writer (write_safetensors), plus hand-built
//                             headers that stop at different checks of the reader;
//   idx_reader_fuzz/          IDX arrays of 1 to 4 dimensions, plain, as gzip files and in the
//                             harness's gzip mode (idx_fuzz_input.h), plus damaged ones;
//   image_decoder_fuzz/       PNGs from libpng (every color type and bit depth the decoder
//                             converts, interlaced) and JPEGs from libjpeg-turbo (gray, 4:2:0,
//                             4:4:4, progressive, restart markers, CMYK), plus damaged ones.
//
//   build/tests/fuzz/reader_fuzz_make_corpus tests/fuzz/corpus
//
// The output is deterministic (same library versions, same bytes). Not run by ctest.

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

// jpeglib.h needs size_t and FILE declared before it.
#include <jpeglib.h>
#include <png.h>
#include <zlib.h>

#include "fuzz/idx_fuzz_input.h"
#include "tenax/core/status.h"
#include "tenax/storage/safetensors.h"

namespace tenax::fuzz {
namespace {

namespace fs = std::filesystem;

std::vector<std::uint8_t> pattern(std::size_t n, std::uint32_t seed) {
  std::vector<std::uint8_t> out(n);
  std::uint32_t x = seed * 2654435761u + 12345u;
  for (std::uint8_t& b : out) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<std::uint8_t>(x >> 24);
  }
  return out;
}

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class Emitter {
 public:
  explicit Emitter(fs::path dir) : dir_(std::move(dir)) { fs::create_directories(dir_); }
  void operator()(const std::string& name, const std::string& bytes) {
    std::ofstream out(dir_ / name, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) throw std::runtime_error("cannot write " + (dir_ / name).string());
    ++count_;
  }
  int count() const { return count_; }

 private:
  fs::path dir_;
  int count_ = 0;
};

std::string flip(std::string bytes, std::size_t at) {
  bytes[at % bytes.size()] = static_cast<char>(bytes[at % bytes.size()] ^ 0x55);
  return bytes;
}

// ---- safetensors ------------------------------------------------------------------------

struct Tensor {
  std::string name;
  storage::DType dtype;
  std::vector<std::int64_t> shape;
};

std::string written_safetensors(const fs::path& scratch, const std::vector<Tensor>& tensors,
                                const std::map<std::string, std::string>& metadata) {
  std::vector<std::vector<std::uint8_t>> keep;
  std::vector<storage::TensorRef> refs;
  std::uint32_t seed = 1;
  for (const Tensor& t : tensors) {
    std::size_t n = storage::dtype_size(t.dtype);
    for (std::int64_t d : t.shape) n *= static_cast<std::size_t>(d);
    keep.push_back(pattern(n, seed++));
    refs.push_back(storage::TensorRef{t.name, t.dtype, t.shape, keep.back().data(), n});
  }
  const fs::path path = scratch / "seed.safetensors";
  const Status s = storage::write_safetensors(path, refs, metadata);
  if (!s.is_ok()) throw std::runtime_error(s.to_string());
  return read_all(path);
}

// A safetensors file from a header given as text, padded to 8, and `data` bytes.
std::string hand_safetensors(std::string header, std::size_t data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  const std::vector<std::uint8_t> bytes = pattern(data, 7);
  return out + header + std::string(bytes.begin(), bytes.end());
}

void safetensors_seeds(const fs::path& scratch, Emitter& emit) {
  using storage::DType;
  const std::string model = written_safetensors(scratch,
                                                {{"bert.embeddings.word_embeddings.weight", DType::kFloat32, {4, 3}},
                                                 {"bert.embeddings.LayerNorm.bias", DType::kFloat32, {3}},
                                                 {"classifier.weight", DType::kFloat32, {2, 3}}},
                                                {{"format", "pt"}});
  emit("model", model);
  emit("dtypes", written_safetensors(scratch,
                                     {{"f32", DType::kFloat32, {2, 2}},
                                      {"f16", DType::kFloat16, {3}},
                                      {"bf16", DType::kBFloat16, {2, 1, 2}},
                                      {"i64", DType::kInt64, {2}},
                                      {"u8", DType::kUInt8, {5}},
                                      {"f64", DType::kFloat64, {1}}},
                                     {}));
  emit("scalar-empty",
       written_safetensors(
           scratch, {{"scalar", DType::kFloat32, {}}, {"none", DType::kInt64, {0, 4}}, {"zero", DType::kUInt8, {0}}},
           {{"format", "pt"}}));
  emit("metadata-only", written_safetensors(scratch, {}, {{"format", "pt"}}));
  emit("nothing", written_safetensors(scratch, {}, {}));
  emit("unicode-name", written_safetensors(scratch, {{"caf\xc3\xa9.weight", DType::kFloat16, {2}}}, {}));

  // Damaged, each stopping at another check.
  emit("bad-truncated", model.substr(0, model.size() - 5));
  emit("bad-trailing", model + "x");
  emit("bad-short", model.substr(0, 7));
  std::string huge = model;
  huge[5] = '\x01';  // header length 2^40 + ...
  emit("bad-header-length", huge);
  emit("bad-header-past-end", flip(model, 1));
  emit("bad-not-json", hand_safetensors("{\"a\": [1, 2", 0));
  emit("bad-not-object", hand_safetensors("{\"a\": 1}", 0));
  emit("bad-deep", hand_safetensors("{\"__metadata__\": {\"a\": [[[[[[[[[[1]]]]]]]]]]}}", 0));
  emit("bad-dtype-i32", hand_safetensors(R"({"a":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}})", 4));
  emit("bad-dtype-unknown", hand_safetensors(R"({"a":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}})", 4));
  emit("bad-shape-overflow",
       hand_safetensors(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0));
  emit("bad-shape-negative", hand_safetensors(R"({"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}})", 1));
  emit("bad-offsets-size", hand_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4));
  emit("bad-offsets-reversed", hand_safetensors(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}})", 4));
  emit("bad-gap", hand_safetensors(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                                   R"("b":{"dtype":"U8","shape":[2],"data_offsets":[3,5]}})",
                                   5));
  emit("bad-overlap", hand_safetensors(R"({"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},)"
                                       R"("b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})",
                                       4));
  emit("bad-metadata-type", hand_safetensors(R"({"__metadata__":{"format":1}})", 0));
  emit("bad-missing-field", hand_safetensors(R"({"a":{"dtype":"U8","shape":[1]}})", 1));
  emit("bad-shape-float", hand_safetensors(R"({"a":{"dtype":"U8","shape":[1.5],"data_offsets":[0,1]}})", 1));
  emit("bad-shape-over-int64",
       hand_safetensors(R"({"a":{"dtype":"U8","shape":[9223372036854775808],"data_offsets":[0,0]}})", 0));
  emit("bad-offsets-three", hand_safetensors(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}})", 1));
  emit("bad-header-array", hand_safetensors("[1, 2]", 0));
}

// ---- IDX --------------------------------------------------------------------------------

std::string idx_file(const std::vector<std::uint32_t>& shape, std::uint32_t seed, std::uint8_t type = 0x08) {
  std::string out = {'\0', '\0', static_cast<char>(type), static_cast<char>(shape.size())};
  std::size_t n = 1;
  for (std::uint32_t d : shape) {
    for (int s = 24; s >= 0; s -= 8) out += static_cast<char>((d >> s) & 0xff);
    n *= d;
  }
  const std::vector<std::uint8_t> data = pattern(n, seed);
  return out + std::string(data.begin(), data.end());
}

std::string gzip(const std::string& plain) {
  z_stream z{};
  if (deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) throw std::runtime_error("deflate");
  std::string out(deflateBound(&z, static_cast<uLong>(plain.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(plain.data()));
  z.avail_in = static_cast<uInt>(plain.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) throw std::runtime_error("deflate");
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

void idx_seeds(Emitter& emit) {
  using sdk::fuzz::encode_idx_input;
  struct Array {
    std::string name;
    std::vector<std::uint32_t> shape;
  };
  const std::vector<Array> arrays = {
      {"labels", {10}}, {"images", {3, 4, 5}}, {"matrix", {2, 7}}, {"four", {2, 1, 3, 2}}};
  std::uint32_t seed = 20;
  for (const Array& a : arrays) {
    const int dims = static_cast<int>(a.shape.size());
    const std::string plain = idx_file(a.shape, seed++);
    emit(a.name + "-plain", encode_idx_input(dims, false, plain));
    emit(a.name + "-gzfile", encode_idx_input(dims, false, gzip(plain)));
    emit(a.name + "-harness-gz", encode_idx_input(dims, true, plain));
  }
  const std::string images = idx_file({3, 4, 5}, 30);
  const std::string images_gz = gzip(images);
  emit("bad-truncated", encode_idx_input(3, false, images.substr(0, images.size() - 1)));
  emit("bad-truncated-header", encode_idx_input(3, true, images.substr(0, 10)));
  emit("bad-trailing", encode_idx_input(3, true, images + "x"));
  emit("bad-magic-type", encode_idx_input(3, false, idx_file({3, 4, 5}, 31, 0x0d)));
  emit("bad-rank", encode_idx_input(1, false, images));
  emit("bad-zero-dim", encode_idx_input(3, true, idx_file({3, 0, 5}, 32)));
  // A header announcing 2^32 bytes (over the reader's limit), followed by no data.
  emit("bad-too-big", encode_idx_input(2, false, std::string("\0\0\x08\x02\0\x01\0\0\0\x01\0\0", 12)));
  emit("bad-gz-truncated", encode_idx_input(3, false, images_gz.substr(0, images_gz.size() / 2)));
  emit("bad-gz-crc", encode_idx_input(3, false, flip(images_gz, images_gz.size() - 6)));
  emit("bad-gz-twice", encode_idx_input(3, false, gzip(images_gz)));
  emit("empty", encode_idx_input(1, false, ""));
}

// ---- PNG and JPEG -----------------------------------------------------------------------

void png_append(png_structp png, png_bytep data, png_size_t length) {
  static_cast<std::string*>(png_get_io_ptr(png))->append(reinterpret_cast<const char*>(data), length);
}

void png_abort(png_structp, png_const_charp message) {
  std::fprintf(stderr, "reader_fuzz_make_corpus: libpng: %s\n", message);
  std::abort();
}

// A PNG of `width` x `height` with `channels` samples of `depth` bits per pixel (samples from a
// pattern; palette images get a 16-color palette with transparency).
std::string png(int width, int height, int color_type, int depth, bool interlaced, std::uint32_t seed) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, png_abort, nullptr);
  png_infop info = png_create_info_struct(png);
  std::string out;
  png_set_write_fn(png, &out, png_append, nullptr);
  png_set_IHDR(png, info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), depth, color_type,
               interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  int channels = 1;
  if (color_type == PNG_COLOR_TYPE_GRAY_ALPHA) channels = 2;
  if (color_type == PNG_COLOR_TYPE_RGB) channels = 3;
  if (color_type == PNG_COLOR_TYPE_RGB_ALPHA) channels = 4;
  if (color_type == PNG_COLOR_TYPE_PALETTE) {
    std::vector<png_color> palette(16);
    std::vector<png_byte> alpha(16);
    const std::vector<std::uint8_t> p = pattern(64, seed);
    for (int i = 0; i < 16; ++i) {
      palette[static_cast<std::size_t>(i)] = png_color{p[4u * i], p[4u * i + 1], p[4u * i + 2]};
      alpha[static_cast<std::size_t>(i)] = p[4u * i + 3];
    }
    png_set_PLTE(png, info, palette.data(), 16);
    png_set_tRNS(png, info, alpha.data(), 16, nullptr);
  }
  png_write_info(png, info);
  const std::size_t row_bytes = (static_cast<std::size_t>(width) * channels * depth + 7) / 8;
  std::vector<std::uint8_t> pixels = pattern(row_bytes * static_cast<std::size_t>(height), seed);
  if (color_type == PNG_COLOR_TYPE_PALETTE && depth == 8) {
    for (std::uint8_t& b : pixels) b &= 15;  // indices inside the 16-color palette
  }
  std::vector<png_bytep> rows;
  for (int y = 0; y < height; ++y) rows.push_back(pixels.data() + row_bytes * static_cast<std::size_t>(y));
  png_write_image(png, rows.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

struct JpegOptions {
  int components = 3;
  J_COLOR_SPACE color_space = JCS_RGB;
  int h_sampling = 2;  // of the first component: 2 = 4:2:0 (with v 2), 1 = 4:4:4
  bool progressive = false;
  unsigned restart_rows = 0;
  int quality = 90;
};

std::string jpeg(int width, int height, const JpegOptions& options, std::uint32_t seed) {
  jpeg_compress_struct cinfo{};
  jpeg_error_mgr error{};
  cinfo.err = jpeg_std_error(&error);  // exits the generator on error
  jpeg_create_compress(&cinfo);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buffer, &size);
  cinfo.image_width = static_cast<JDIMENSION>(width);
  cinfo.image_height = static_cast<JDIMENSION>(height);
  cinfo.input_components = options.components;
  cinfo.in_color_space = options.color_space;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, options.quality, TRUE);
  if (options.components == 3) {
    cinfo.comp_info[0].h_samp_factor = options.h_sampling;
    cinfo.comp_info[0].v_samp_factor = options.h_sampling;
  }
  if (options.progressive) jpeg_simple_progression(&cinfo);
  cinfo.restart_in_rows = static_cast<int>(options.restart_rows);
  jpeg_start_compress(&cinfo, TRUE);
  const std::size_t row_bytes = static_cast<std::size_t>(width) * static_cast<std::size_t>(options.components);
  std::vector<std::uint8_t> pixels = pattern(row_bytes * static_cast<std::size_t>(height), seed);
  // Smooth the noise a little so the coefficients are not all at their maximum.
  for (std::size_t i = row_bytes; i < pixels.size(); ++i)
    pixels[i] = static_cast<std::uint8_t>((pixels[i] + pixels[i - row_bytes]) / 2);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = pixels.data() + row_bytes * cinfo.next_scanline;
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::string out(reinterpret_cast<const char*>(buffer), size);
  std::free(buffer);
  return out;
}

void put_be(std::string& bytes, std::size_t at, std::uint32_t value, int width) {
  for (int i = 0; i < width; ++i) {
    bytes[at + static_cast<std::size_t>(i)] = static_cast<char>((value >> (8 * (width - 1 - i))) & 0xff);
  }
}

// The PNG with its IHDR announcing `width` x `height`, the chunk's CRC made to match.
std::string png_resized(std::string png, std::uint32_t width, std::uint32_t height) {
  put_be(png, 16, width, 4);  // signature 8, chunk length 4, "IHDR" 4
  put_be(png, 20, height, 4);
  const auto crc = crc32(0, reinterpret_cast<const Bytef*>(png.data() + 12), 17);  // type + 13 bytes
  put_be(png, 29, static_cast<std::uint32_t>(crc), 4);
  return png;
}

// The JPEG with its start-of-frame marker announcing `width` x `height`.
std::string jpeg_resized(std::string jpeg, std::uint16_t width, std::uint16_t height) {
  for (std::size_t i = 2; i + 9 < jpeg.size(); ++i) {
    const auto a = static_cast<unsigned char>(jpeg[i]), b = static_cast<unsigned char>(jpeg[i + 1]);
    if (a == 0xff && (b == 0xc0 || b == 0xc2)) {
      put_be(jpeg, i + 5, height, 2);  // marker 2, length 2, precision 1
      put_be(jpeg, i + 7, width, 2);
      return jpeg;
    }
  }
  throw std::runtime_error("no SOF marker");
}

void image_seeds(Emitter& emit) {
  const std::string rgb = png(6, 5, PNG_COLOR_TYPE_RGB, 8, false, 40);
  emit("png-rgb8", rgb);
  emit("png-rgba8", png(5, 4, PNG_COLOR_TYPE_RGB_ALPHA, 8, false, 41));
  emit("png-rgb16", png(3, 3, PNG_COLOR_TYPE_RGB, 16, false, 42));
  emit("png-gray8", png(7, 3, PNG_COLOR_TYPE_GRAY, 8, false, 43));
  emit("png-gray1", png(9, 3, PNG_COLOR_TYPE_GRAY, 1, false, 44));
  emit("png-gray16", png(2, 5, PNG_COLOR_TYPE_GRAY, 16, false, 45));
  emit("png-gray-alpha8", png(4, 4, PNG_COLOR_TYPE_GRAY_ALPHA, 8, false, 46));
  emit("png-palette4-trns", png(5, 5, PNG_COLOR_TYPE_PALETTE, 4, false, 47));
  emit("png-palette8-trns", png(3, 2, PNG_COLOR_TYPE_PALETTE, 8, false, 48));
  emit("png-rgb8-interlaced", png(9, 9, PNG_COLOR_TYPE_RGB, 8, true, 49));
  emit("png-bad-truncated", rgb.substr(0, rgb.size() / 2));
  emit("png-bad-ihdr-crc", flip(rgb, 30));           // the IHDR chunk's CRC
  emit("png-bad-idat", flip(rgb, rgb.size() - 20));  // inside the compressed pixels
  emit("png-bad-signature-only", rgb.substr(0, 8));
  emit("not-an-image", std::string("GIF89a\x01\x00\x01\x00\x00\x00\x00;", 14));
  // Headers announcing more than the data hold: libpng's largest size (over Pillow's
  // decompression-bomb limit), and one under that limit but over what the file's bytes can carry.
  emit("png-bad-ihdr-1000000x1000000", png_resized(rgb, 1000000, 1000000));
  emit("png-bad-ihdr-3000x3000", png_resized(rgb, 3000, 3000));

  const std::string color = jpeg(16, 8, JpegOptions{}, 50);
  emit("jpeg-rgb-420", color);
  JpegOptions gray;
  gray.components = 1;
  gray.color_space = JCS_GRAYSCALE;
  emit("jpeg-gray", jpeg(8, 8, gray, 51));
  JpegOptions full;
  full.h_sampling = 1;
  emit("jpeg-rgb-444-odd", jpeg(13, 7, full, 52));
  JpegOptions progressive;
  progressive.progressive = true;
  emit("jpeg-progressive", jpeg(16, 16, progressive, 53));
  JpegOptions restarts;
  restarts.restart_rows = 1;
  emit("jpeg-restart", jpeg(16, 32, restarts, 54));
  JpegOptions cmyk;
  cmyk.components = 4;
  cmyk.color_space = JCS_CMYK;
  emit("jpeg-cmyk", jpeg(8, 8, cmyk, 55));
  emit("jpeg-bad-truncated", color.substr(0, color.size() - 12));  // inside the scan
  emit("jpeg-bad-scan", flip(color, color.size() - 30));
  emit("jpeg-bad-soi-only", color.substr(0, 3));
  // As for PNG: over the pixel limit, and under it but far more than the file holds (decoding
  // stops at the end of the data).
  emit("jpeg-bad-sof-65000x65000", jpeg_resized(color, 65000, 65000));
  emit("jpeg-bad-sof-4000x4000", jpeg_resized(color, 4000, 4000));
  emit("jpeg-bad-progressive-sof-4000x4000", jpeg_resized(jpeg(16, 16, progressive, 53), 4000, 4000));
}

int run(const fs::path& out_dir) {
  const fs::path scratch = fs::temp_directory_path() / ("tenax-make-reader-corpus-" + std::to_string(::getpid()));
  fs::remove_all(scratch);
  fs::create_directories(scratch);
  Emitter safetensors(out_dir / "safetensors_reader_fuzz");
  safetensors_seeds(scratch, safetensors);
  Emitter idx(out_dir / "idx_reader_fuzz");
  idx_seeds(idx);
  Emitter images(out_dir / "image_decoder_fuzz");
  image_seeds(images);
  fs::remove_all(scratch);
  std::printf("wrote %d safetensors, %d IDX and %d image corpus files under %s\n", safetensors.count(), idx.count(),
              images.count(), out_dir.c_str());
  return 0;
}

}  // namespace
}  // namespace tenax::fuzz

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus dir>\n", argv[0]);
    return 2;
  }
  try {
    return tenax::fuzz::run(argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "reader_fuzz_make_corpus: %s\n", e.what());
    return 1;
  }
}
