// Refused: a GUARDED_BY member written without its mutex.
#include "counter.h"

namespace kforge::planted {

void Counter::add(int n) {
  total_ += n;
}

}  // namespace kforge::planted
