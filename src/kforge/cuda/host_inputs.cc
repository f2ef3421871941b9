#include "kforge/cuda/host_inputs.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <numbers>
#include <thread>

#include "kforge/common/hash.h"

namespace kforge::cuda {
namespace {

constexpr int64_t kChunkElements = int64_t{1} << 16;
constexpr unsigned kMaxThreads = 16;

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// xoshiro256** (Blackman & Vigna).
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (auto& s : s_)
      s = splitmix64(seed);
  }
  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform integer in [0, n) without modulo bias.
  uint64_t below(uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t v = next();
    while (v >= limit)
      v = next();
    return v % n;
  }
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u1 = 0;
    while (u1 <= 0)
      u1 = uniform();
    const double u2 = uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2.0 * std::numbers::pi * u2);
    has_spare_ = true;
    return r * std::cos(2.0 * std::numbers::pi * u2);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4] = {};
  bool has_spare_ = false;
  double spare_ = 0;
};

// The parser decoded (and inflated) the data once and checked its size (model/parse.h); the
// tensor is those bytes.
StatusOr<HostTensor> decode_data(const model::TensorSpec& spec) {
  const model::TensorData& d = *spec.data;
  HostTensor t = HostTensor::zeros(spec.dtype, spec.shape);
  if (d.bytes == nullptr) {
    return invalid_argument("tensor data was not decoded by the request parser");
  }
  if (d.bytes->size() != t.bytes.size()) {
    return invalid_argument("tensor data holds " + std::to_string(d.bytes->size()) +
                            " bytes, shape x dtype needs " + std::to_string(t.bytes.size()));
  }
  if (!d.bytes->empty()) std::memcpy(t.bytes.data(), d.bytes->data(), d.bytes->size());
  return t;
}

}  // namespace

uint64_t derive_seed(uint64_t server_seed, const std::vector<std::string>& parts) {
  std::string text = std::to_string(server_seed);
  for (const auto& p : parts)
    text += ":" + p;
  Sha256Digest digest = sha256(text);
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | digest[static_cast<size_t>(i)];
  return v >> 1;
}

namespace {

// Runs fn(begin, end, chunk) over [0, n) in chunks of kChunkElements, on up to
// kMaxThreads threads. A chunk's work depends only on its index, so the result does not
// depend on the number of threads.
template <typename Fn>
void for_each_chunk(int64_t n, Fn&& fn) {
  const int64_t chunks = (n + kChunkElements - 1) / kChunkElements;
  auto run_chunk = [&](int64_t c) {
    fn(c * kChunkElements, std::min(n, (c + 1) * kChunkElements), static_cast<uint64_t>(c));
  };
  const auto threads = static_cast<int64_t>(
      std::min<unsigned>(kMaxThreads, std::max(1u, std::thread::hardware_concurrency())));
  if (chunks <= 1 || threads <= 1) {
    for (int64_t c = 0; c < chunks; ++c)
      run_chunk(c);
    return;
  }
  std::atomic<int64_t> next{0};
  auto worker = [&] {
    for (int64_t c = next++; c < chunks; c = next++)
      run_chunk(c);
  };
  std::vector<std::jthread> pool;
  for (int64_t i = 1; i < std::min(threads, chunks); ++i)
    pool.emplace_back(worker);
  worker();
}

}  // namespace

StatusOr<HostTensor> make_host_tensor(const model::TensorSpec& spec, uint64_t seed) {
  if (spec.data) return decode_data(spec);
  HostTensor t = HostTensor::zeros(spec.dtype, spec.shape);
  const int64_t n = t.numel();
  const bool floating = model::is_floating(spec.dtype);
  model::InitSpec init;
  if (spec.init) {
    init = *spec.init;
  } else {
    init.kind = floating ? model::InitKind::kRandn : model::InitKind::kUniform;
    init.low = 0.0;
    init.high = 9.0;
  }
  // Each chunk of kChunkElements has its own generator, seeded from (seed, chunk index).
  auto chunk_rng = [seed](uint64_t chunk) {
    uint64_t state = seed ^ (chunk * 0xD1B54A32D192ED03ull);
    return Rng(splitmix64(state));
  };
  switch (init.kind) {
    case model::InitKind::kZeros:
      break;
    case model::InitKind::kOnes:
    case model::InitKind::kFull: {
      const double v = init.kind == model::InitKind::kOnes ? 1.0 : init.fill_value;
      for_each_chunk(n, [&](int64_t b, int64_t e, uint64_t) {
        for (int64_t i = b; i < e; ++i)
          t.set(i, v);
      });
      break;
    }
    case model::InitKind::kArange:
      for_each_chunk(n, [&](int64_t b, int64_t e, uint64_t) {
        for (int64_t i = b; i < e; ++i)
          t.set(i, static_cast<double>(i) * init.step + init.start);
      });
      break;
    case model::InitKind::kRandn:
    case model::InitKind::kUniform:
      if (spec.dtype == model::DType::kBool) {
        for_each_chunk(n, [&](int64_t b, int64_t e, uint64_t c) {
          Rng rng = chunk_rng(c);
          for (int64_t i = b; i < e; ++i)
            t.set_int(i, static_cast<int64_t>(rng.next() >> 63));
        });
      } else if (!floating) {
        if (init.kind == model::InitKind::kRandn) {
          return invalid_argument("init 'randn' needs a floating dtype");
        }
        const double lo = std::ceil(init.low);
        const double hi = std::floor(init.high);
        if (lo > hi) return invalid_argument("no integer lies in [low, high]");
        const auto span = static_cast<uint64_t>(hi - lo) + 1;
        for_each_chunk(n, [&](int64_t b, int64_t e, uint64_t c) {
          Rng rng = chunk_rng(c);
          for (int64_t i = b; i < e; ++i)
            t.set_int(i, static_cast<int64_t>(lo) + static_cast<int64_t>(rng.below(span)));
        });
      } else if (init.kind == model::InitKind::kRandn) {
        for_each_chunk(n, [&](int64_t b, int64_t e, uint64_t c) {
          Rng rng = chunk_rng(c);
          for (int64_t i = b; i < e; ++i)
            t.set(i, rng.normal() * init.std + init.mean);
        });
      } else {
        for_each_chunk(n, [&](int64_t b, int64_t e, uint64_t c) {
          Rng rng = chunk_rng(c);
          for (int64_t i = b; i < e; ++i)
            t.set(i, init.low + (init.high - init.low) * rng.uniform());
        });
      }
      break;
  }
  return t;
}

StatusOr<std::vector<HostArg>> make_host_inputs(const model::IOContract& io, uint64_t server_seed,
                                                int trial) {
  std::vector<HostArg> out;
  for (const auto& arg : io.args) {
    if (arg.type != model::ArgType::kTensor) continue;
    const model::TensorSpec& spec = *arg.tensor_spec;
    HostArg h;
    h.spec = &arg;
    if (arg.role == model::ArgRole::kOutput) {
      h.data = HostTensor::zeros(spec.dtype, spec.shape);
    } else {
      std::string init_seed =
          spec.init && spec.init->seed ? std::to_string(*spec.init->seed) : std::string("None");
      uint64_t seed = derive_seed(
          server_seed, {"trial", std::to_string(trial), "arg", arg.name, "init", init_seed});
      auto t = make_host_tensor(spec, seed);
      if (!t.is_ok()) {
        return invalid_argument("argument '" + arg.name + "': " + t.status().message());
      }
      h.data = std::move(t).value();
    }
    out.push_back(std::move(h));
  }
  return out;
}

}  // namespace kforge::cuda
