// libFuzzer target: the HTTP/1.1 request reader (http_reader.h: Beast's parser as the server
// sets it up, the framing and Content-Length checks, chunked bodies, the query parser).
// Oracles: no crash or sanitizer report; a request that is read respects the limits, and the
// reader never claims more bytes than it was given.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kforge/frontends/http/http_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using kforge::frontends::http::read_request;
  using kforge::frontends::http::ReaderLimits;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const ReaderLimits limits{4096, 8192};
  auto outcome = read_request(bytes, limits);
  if (outcome.consumed > size) __builtin_trap();
  if (outcome.request && outcome.refusal) __builtin_trap();
  if (outcome.request && outcome.request->body.size() > limits.max_body_bytes) __builtin_trap();
  if (outcome.refusal && (outcome.refusal->status < 400 || outcome.refusal->status > 599)) {
    __builtin_trap();
  }
  return 0;
}
