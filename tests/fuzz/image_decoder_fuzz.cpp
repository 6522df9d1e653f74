// libFuzzer target for the image decoders (sdk/src/vision/image_decode.cpp): decode_image on
// the input bytes, which it sends to libpng or libjpeg-turbo by their first bytes, the way
// ViTImageProcessor and the image data sets decode every file they are given. The bytes overload
// is the one the path overload calls after reading the file, so no file is written.
//
// The contract under test (image.h): arbitrary bytes never crash, leak, hit undefined
// behaviour, hang or throw anything but StorageError, whose message starts with the source's
// name; an image decoded OK has a positive height and width and exactly height * width * 3
// bytes of RGB. A violation aborts with a message (scratch_file.h).

#include <cstdint>
#include <string>

#include "fuzz/scratch_file.h"
#include "tenax/core/error.h"
#include "tenax/sdk/vision/image.h"

namespace {

constexpr const char* kTarget = "image_decoder_fuzz";
constexpr const char* kWhere = "fuzz/input-image";

void expect(bool holds, const std::string& what) {
  if (!holds) tenax::fuzz::violated(kTarget, what);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  tenax::sdk::Image image;
  try {
    image = tenax::sdk::decode_image(bytes, kWhere);
  } catch (const tenax::StorageError& e) {
    expect(std::string(e.what()).rfind(std::string(kWhere) + ": ", 0) == 0,
           std::string("error does not start with the source's name: ") + e.what());
    return 0;
  }
  expect(image.height > 0 && image.width > 0,
         "decoded an image of " + std::to_string(image.height) + " x " + std::to_string(image.width) + " pixels");
  expect(image.rgb.size() == static_cast<std::uint64_t>(image.height) * static_cast<std::uint64_t>(image.width) * 3,
         "rgb holds " + std::to_string(image.rgb.size()) + " bytes for " + std::to_string(image.height) + " x " +
             std::to_string(image.width) + " pixels");
  return 0;
}
