#include "kforge/common/errno_message.h"

#include <cstring>

namespace kforge {

std::string errno_message(int err) {
  char buf[256];
  // GNU strerror_r returns a pointer that may or may not be `buf`.
  const char* text = strerror_r(err, buf, sizeof(buf));
  return text;
}

}  // namespace kforge
