#include "console/views/palette.h"

#include <algorithm>
#include <cmath>

namespace sy::console::palette {
namespace {

ImU32 lerp(ImU32 a, ImU32 b, double t) {
  t = std::clamp(t, 0.0, 1.0);
  auto channel = [&](int shift) {
    const double ca = static_cast<double>((a >> shift) & 0xFF);
    const double cb = static_cast<double>((b >> shift) & 0xFF);
    return static_cast<ImU32>(std::lround(ca + (cb - ca) * t)) << shift;
  };
  return channel(IM_COL32_R_SHIFT) | channel(IM_COL32_G_SHIFT) | channel(IM_COL32_B_SHIFT) |
         (0xFFu << IM_COL32_A_SHIFT);
}

}  // namespace

ImU32 mix(ImU32 a, ImU32 b, double t) { return lerp(a, b, t); }

ImU32 span_kind(telemetry::SpanKind kind) {
  using telemetry::SpanKind;
  switch (kind) {
    case SpanKind::Attention: return IM_COL32(76, 132, 214, 255);
    case SpanKind::Expert: return IM_COL32(84, 176, 104, 255);
    case SpanKind::SharedExpert: return IM_COL32(60, 170, 170, 255);
    case SpanKind::Sampler: return IM_COL32(160, 110, 210, 255);
    case SpanKind::Transfer: return IM_COL32(226, 148, 62, 255);
    case SpanKind::WeightFetch: return IM_COL32(190, 160, 90, 255);
    case SpanKind::Stall: return IM_COL32(200, 70, 70, 255);
    case SpanKind::Merge: return IM_COL32(120, 150, 190, 255);
  }
  return IM_COL32(128, 128, 128, 255);
}

ImU32 stall_reason(telemetry::StallReason reason) {
  using telemetry::StallReason;
  switch (reason) {
    case StallReason::None: return IM_COL32(200, 70, 70, 255);
    case StallReason::QueueEmpty: return IM_COL32(96, 98, 106, 255);
    case StallReason::Barrier: return IM_COL32(214, 64, 64, 255);
    case StallReason::Transfer: return IM_COL32(222, 176, 40, 255);
    case StallReason::Weights: return IM_COL32(200, 80, 190, 255);
  }
  return IM_COL32(200, 70, 70, 255);
}

ImU32 scale(ImU32 colour, float factor) {
  auto channel = [&](int shift) {
    const float c = static_cast<float>((colour >> shift) & 0xFF) * factor;
    return static_cast<ImU32>(std::clamp(c, 0.0f, 255.0f)) << shift;
  };
  return channel(IM_COL32_R_SHIFT) | channel(IM_COL32_G_SHIFT) | channel(IM_COL32_B_SHIFT) |
         (colour & (0xFFu << IM_COL32_A_SHIFT));
}

ImU32 span(const telemetry::Span& s) {
  if (s.kind == telemetry::SpanKind::Stall) return stall_reason(s.stall_reason);
  const ImU32 base = span_kind(s.kind);
  if (s.kind == telemetry::SpanKind::Expert && s.index >= 0) {
    static constexpr float kShades[] = {1.0f, 0.82f, 1.12f, 0.9f, 1.2f, 0.75f, 1.05f, 0.86f};
    return scale(base, kShades[static_cast<unsigned>(s.index) % 8]);
  }
  return base;
}

ImU32 heat(double x) {
  static constexpr ImU32 kStops[] = {IM_COL32(20, 22, 60, 255), IM_COL32(40, 70, 160, 255),
                                     IM_COL32(30, 160, 150, 255), IM_COL32(150, 210, 70, 255),
                                     IM_COL32(255, 230, 60, 255)};
  constexpr int n = 5;
  if (!(x > 0)) return kStops[0];
  x = std::min(x, 1.0) * (n - 1);
  const int i = std::min(static_cast<int>(x), n - 2);
  return lerp(kStops[i], kStops[i + 1], x - i);
}

ImU32 ratio(double r) {
  const ImU32 neutral = IM_COL32(70, 72, 80, 255);
  if (!(r > 0)) return IM_COL32(30, 32, 40, 255);
  const double l = std::clamp(std::log2(r) / 2.0, -1.0, 1.0);  // 1/4 .. 4
  return l < 0 ? lerp(neutral, IM_COL32(50, 110, 230, 255), -l) : lerp(neutral, IM_COL32(240, 70, 50, 255), l);
}

ImU32 series(int i) {
  static constexpr ImU32 kSeries[] = {IM_COL32(90, 170, 255, 255), IM_COL32(255, 150, 60, 255),
                                      IM_COL32(110, 210, 110, 255), IM_COL32(240, 90, 110, 255),
                                      IM_COL32(190, 140, 255, 255), IM_COL32(240, 220, 90, 255),
                                      IM_COL32(90, 220, 220, 255),  IM_COL32(230, 130, 200, 255)};
  return kSeries[static_cast<unsigned>(i) % 8];
}

}  // namespace sy::console::palette
