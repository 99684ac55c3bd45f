#include "engine/cpu/virtual_stream.h"

#include <algorithm>

namespace sy {

void VirtualStream::submit(Work work, Completion done) {
  const std::int64_t start = std::max(loop_.now(), free_at_);
  const std::int64_t duration = work();
  const ExecutionTiming timing{start, start + std::max<std::int64_t>(0, duration)};
  free_at_ = timing.end_ns;
  loop_.post(timing.end_ns, [done = std::move(done), timing] { done(timing); });
}

}  // namespace sy
