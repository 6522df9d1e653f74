// 8-bit RGB images: decoding PNG and JPEG files (libpng, libjpeg-turbo: the decoders Debian's
// Pillow links, so the pixels are Pillow's) and Pillow's bilinear resize, bit for bit.
//
// Decoding gives what Python's `Image.open(path).convert("RGB")` gives: grayscale replicated to
// three channels, a palette expanded, an alpha channel dropped (not composited), no gamma
// correction. Thread-safety: stateless functions; an Image is a plain value.
//
//   Image img = decode_image("photo.jpg");
//   Image small = resize_bilinear(img, 224, 224);    // = img.resize((224, 224), Image.BILINEAR)
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace tenax::sdk {

/// Interleaved 8-bit RGB, row by row: pixel (y, x) channel c is rgb[(y * width + x) * 3 + c].
struct Image {
  std::int64_t height = 0;
  std::int64_t width = 0;
  std::vector<std::uint8_t> rgb;
};

/// Decodes a PNG or JPEG file (told apart by its first bytes, not its name) into RGB. Throws
/// StorageError naming the file when it cannot be read, is neither format, is corrupt or
/// truncated, announces more than 178,956,970 pixels (Pillow's decompression-bomb limit, which
/// Pillow refuses too; checked before any pixel memory is taken), or is a kind this decoder
/// refuses rather than guesses (CMYK JPEG).
Image decode_image(const std::filesystem::path& path);
/// As decode_image, on bytes already read; `where` names the source in errors.
Image decode_image(const std::string& bytes, const std::string& where);

/// Pillow's Image.resize((width, height), Image.BILINEAR) for an RGB image: the separable
/// triangle filter widened by the scale factor when shrinking (antialiasing), coefficients in
/// Pillow's 22-bit fixed point, the horizontal pass first, each pass rounded to 8 bits.
/// Throws ConfigError for a non-positive size.
Image resize_bilinear(const Image& image, std::int64_t height, std::int64_t width);

}  // namespace tenax::sdk
