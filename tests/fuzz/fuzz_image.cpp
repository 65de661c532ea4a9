// libFuzzer target: images as `kiln run --image` reads them (tools/image.cpp:
// the formats kiln documents, their sizes, the PNG inflation bound, then
// stb_image).
#include "fuzz_readers.h"
#include "tools/image.h"

#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  kiln::fuzz::expect_result_or_user_error("an image", [&] {
    const kiln::tools::RgbImage image = kiln::tools::decode_rgb_image(bytes, "fuzz.png");
    if (image.rgb.size() != static_cast<std::size_t>(image.info.width) * image.info.height * 3) std::abort();
  });
  return 0;
}
