#include "kforge/common/hash.h"

#include <openssl/evp.h>

#include "kforge/common/status.h"

namespace kforge {

Sha256Digest sha256(std::string_view data) {
  Sha256Digest digest{};
  unsigned int size = 0;
  // EVP_Digest fails only when OpenSSL cannot allocate: a broken invariant, not an input error
  // (it aborts, on every thread alike, instead of a throw that some threads turned into a 500).
  const bool ok =
      EVP_Digest(data.data(), data.size(), digest.data(), &size, EVP_sha256(), nullptr) == 1;
  KF_CHECK(ok && size == digest.size(), "EVP_Digest(sha256) failed");
  return digest;
}

std::string sha256_hex(std::string_view data) {
  static constexpr char kHex[] = "0123456789abcdef";
  Sha256Digest digest = sha256(data);
  std::string out;
  out.reserve(digest.size() * 2);
  for (uint8_t b : digest) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 0xF]);
  }
  return out;
}

}  // namespace kforge
