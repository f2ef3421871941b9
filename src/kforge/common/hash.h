// SHA-256 (OpenSSL EVP underneath), for content-addressed caches and derived seeds.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace kforge {

using Sha256Digest = std::array<uint8_t, 32>;

Sha256Digest sha256(std::string_view data);

// Lowercase hex of sha256(data): 64 characters.
std::string sha256_hex(std::string_view data);

}  // namespace kforge
