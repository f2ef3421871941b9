#include "kforge/frontends/http/blocking_executor.h"

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

namespace kforge::frontends::http {

BlockingExecutor make_blocking_executor(boost::asio::thread_pool& pool) {
  return [&pool](std::function<void()> task) { boost::asio::post(pool, std::move(task)); };
}

}  // namespace kforge::frontends::http
