#include "kforge/common/random.h"

#include <sys/random.h>

#include <array>
#include <cerrno>
#include <string>

#include "kforge/common/errno_message.h"
#include "kforge/common/status.h"

namespace kforge {
namespace {

void fill_random(void* buffer, size_t size) {
  auto* out = static_cast<unsigned char*>(buffer);
  size_t done = 0;
  while (done < size) {
    ssize_t n = getrandom(out + done, size - done, 0);
    if (n < 0 && errno == EINTR) continue;
    // getrandom cannot fail on Linux >= 3.17 once the pool is initialised; a failure here is a
    // broken invariant of the host, not an input error.
    KF_CHECK(n >= 0, "getrandom failed: " + errno_message(errno));
    done += static_cast<size_t>(n);
  }
}

}  // namespace

uint64_t secure_random_u64() {
  uint64_t v = 0;
  fill_random(&v, sizeof(v));
  return v;
}

std::string random_hex(size_t n_bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string bytes(n_bytes, '\0');
  fill_random(bytes.data(), bytes.size());
  std::string out;
  out.reserve(n_bytes * 2);
  for (unsigned char b : bytes) {
    out += kDigits[b >> 4];
    out += kDigits[b & 0xf];
  }
  return out;
}

std::string new_job_id() {
  return random_hex(16);
}

}  // namespace kforge
