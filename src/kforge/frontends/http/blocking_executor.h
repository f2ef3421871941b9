// BlockingExecutor: where handlers send work that may block (store access, JSON parsing of
// big bodies), so that io threads never wait. A plain function type keeps handlers free of
// Asio; `make_blocking_executor` adapts a boost::asio::thread_pool.
//
// Example:
//   BlockingExecutor pool = make_blocking_executor(thread_pool);
//   pool([responder, &service] { responder.send(HttpResponse::json(200, service.stats())); });
#pragma once

#include <functional>

namespace boost::asio {
class thread_pool;
}  // namespace boost::asio

namespace kforge::frontends::http {

// Runs the task later on another thread; must not run it inline. Thread-safe.
using BlockingExecutor = std::function<void(std::function<void()> task)>;

// Posts tasks to `pool`, which must outlive every use of the returned executor (tasks posted
// after the pool was joined are dropped by Asio).
BlockingExecutor make_blocking_executor(boost::asio::thread_pool& pool);

}  // namespace kforge::frontends::http
