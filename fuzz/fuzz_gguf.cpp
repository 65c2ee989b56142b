// libFuzzer target for the GGUF reader: parse arbitrary bytes; on success read every metadata value
// through every getter and every byte of every tensor, so a view past the input shows up under
// ASan. Seeds: fuzz/corpus/ (writer output, kept current by test_gguf_writer.FuzzSeedsAreCurrent).
#include <cstddef>
#include <cstdint>

#include "gguf/make_test_gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  auto parsed = gguf::GgufFile::parse(MappedFile::from_memory(data, size));
  if (!parsed.ok()) {
    TESSERA_CHECK(!parsed.error().message.empty(), "an error without a message");
    return 0;
  }
  volatile uint64_t sink = gguf::testing::touch_everything(*parsed);
  (void)sink;
  return 0;
}
