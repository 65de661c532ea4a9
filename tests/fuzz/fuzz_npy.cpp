// libFuzzer target: .npy files (kiln::parse_npy). A tensor that parses is
// written again and must parse to the same bytes.
#include <kiln/npy.h>

#include "fuzz_readers.h"

#include <cstdint>
#include <cstring>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  kiln::fuzz::expect_result_or_user_error("a .npy file", [&] {
    const kiln::Tensor tensor = kiln::parse_npy(bytes, "fuzz.npy");
    const kiln::Tensor again = kiln::parse_npy(kiln::format_npy(tensor), "written again");
    if (again.nbytes() != tensor.nbytes() || again.shape() != tensor.shape() ||
        std::memcmp(again.bytes().data(), tensor.bytes().data(), tensor.nbytes()) != 0)
      std::abort();  // a round trip that changes the tensor
  });
  return 0;
}
