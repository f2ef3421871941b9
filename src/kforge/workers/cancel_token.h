// Cancellation signal for one running job: `cancel()` from any thread wakes a poll() on
// `wait_fd()` in the worker's loop.
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <string>

namespace kforge::workers {

class CancelToken {
 public:
  CancelToken() : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}
  ~CancelToken() {
    if (fd_ >= 0) ::close(fd_);
  }
  CancelToken(const CancelToken&) = delete;
  CancelToken& operator=(const CancelToken&) = delete;

  void cancel() {
    cancelled_.store(true);
    uint64_t one = 1;
    ssize_t ignored = ::write(fd_, &one, sizeof(one));
    (void)ignored;
  }
  bool cancelled() const { return cancelled_.load(); }
  // Readable once cancel() was called.
  int wait_fd() const { return fd_; }

 private:
  int fd_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace kforge::workers
