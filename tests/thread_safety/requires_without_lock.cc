// Refused: a REQUIRES function called without the mutex.
#include "counter.h"

namespace kforge::planted {

void Counter::add(int n) {
  add_locked(n);
}

}  // namespace kforge::planted
