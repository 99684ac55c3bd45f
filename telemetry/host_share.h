// Host time: the share of a device's time that busy and the stalls leave. On the cpu and cuda
// backends it is the dispatch latency between the engine's loop and the device (before an
// execution starts and after it ends); on the sim, whose executions start and end on the loop's
// clock, it is 0. Every report that shows busy and stall shares derives it here, alike.
#pragma once

namespace sy::telemetry {

// `accounted`: busy plus every stall, as fractions of the same time. A remainder under a
// microsecond per second is the fractions' rounding, not time.
inline double host_share(double accounted) { return accounted < 1.0 - 1e-6 ? 1.0 - accounted : 0.0; }

}  // namespace sy::telemetry
