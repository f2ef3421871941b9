// Unpredictable identifiers and seeds from the kernel's CSPRNG (getrandom).
#pragma once

#include <cstdint>
#include <string>

namespace kforge {

// 64 random bits from getrandom(2).
uint64_t secure_random_u64();

// `n_bytes` random bytes as lowercase hex (2 * n_bytes characters).
std::string random_hex(size_t n_bytes);

// A job id: 32 lowercase hex characters (128 random bits), URL-safe and unguessable.
std::string new_job_id();

}  // namespace kforge
