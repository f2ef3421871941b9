#include "kforge/workbench/context_meter.h"

namespace kforge::workbench {

int64_t estimate_tokens(std::string_view text) {
  int64_t ascii = 0;
  int64_t others = 0;
  for (unsigned char c : text) {
    if (c < 0x80) {
      ++ascii;
    } else if ((c & 0xC0) != 0x80) {  // the lead byte of a multi-byte code point
      ++others;
    }
  }
  return (ascii + 3) / 4 + others;
}

}  // namespace kforge::workbench
