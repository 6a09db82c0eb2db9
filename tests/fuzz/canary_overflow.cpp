// Not a test of tessera: a planted heap overflow, reached only by inputs that start with "BUG". scripts/fuzz.sh runs
// it first and requires that libFuzzer finds the input and AddressSanitizer reports the overflow: the proof that the
// build instruments code and that a crash fails the run.
#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size >= 3 && data[0] == 'B' && data[1] == 'U' && data[2] == 'G') {
    std::vector<std::uint8_t> copy(data, data + size);
    volatile std::uint8_t past_the_end = copy.data()[size];
    (void)past_the_end;
  }
  return 0;
}
