#include "engine/model/rope_scaling.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numbers>

namespace sy {

const char* rope_type_name(RopeType type) {
  switch (type) {
    case RopeType::Default: return "default";
    case RopeType::Linear: return "linear";
    case RopeType::Yarn: return "yarn";
    case RopeType::Llama3: return "llama3";
  }
  return "?";
}

namespace {

// base ** (arange(0, dim, 2).float() / dim) in float32: the exponent a float32 quotient, the
// power a float32 pow of float32(base). The file is built without FMA contraction (no -mfma),
// so each float expression below rounds where torch's separate kernels do.
std::vector<float> powers(std::int32_t dim, double theta) {
  const auto base = static_cast<float>(theta);
  std::vector<float> p(static_cast<std::size_t>(dim / 2));
  for (std::int32_t i = 0; i < dim / 2; ++i)
    p[static_cast<std::size_t>(i)] = std::pow(base, static_cast<float>(2 * i) / static_cast<float>(dim));
  return p;
}

// _compute_yarn_parameters' get_mscale.
double yarn_mscale(double scale, double mscale) { return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

// find_correction_dim: the dimension whose wavelength makes `rotations` turns over `max_pos`.
double correction_dim(double rotations, std::int32_t dim, double base, double max_pos) {
  return (dim * std::log(max_pos / (rotations * 2 * std::numbers::pi))) / (2 * std::log(base));
}

RopeFrequencies yarn(std::int32_t dim, double theta, const RopeScaling& s) {
  const double factor = s.factor;
  RopeFrequencies out;
  double attention = 0;
  if (s.attention_factor) {
    attention = *s.attention_factor;
  } else if (s.mscale != 0 && s.mscale_all_dim != 0) {
    attention = yarn_mscale(factor, s.mscale) / yarn_mscale(factor, s.mscale_all_dim);
  } else {
    attention = yarn_mscale(factor, 1);
  }
  out.attention_scaling = static_cast<float>(attention);

  const double beta_fast = s.beta_fast != 0 ? s.beta_fast : 32;  // `get("beta_fast") or 32`
  const double beta_slow = s.beta_slow != 0 ? s.beta_slow : 1;
  const auto max_pos = static_cast<double>(s.original_max_position_embeddings);
  double low = correction_dim(beta_fast, dim, theta, max_pos);
  double high = correction_dim(beta_slow, dim, theta, max_pos);
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // linear_ramp_factor's guard against a zero range

  const std::vector<float> pos_freqs = powers(dim, theta);
  const auto factor_f = static_cast<float>(factor);
  const auto low_f = static_cast<float>(low);
  const auto range_f = static_cast<float>(high - low);
  out.inv_freq.resize(pos_freqs.size());
  for (std::size_t i = 0; i < pos_freqs.size(); ++i) {
    const float extrapolation = 1.0f / pos_freqs[i];
    const float interpolation = 1.0f / (factor_f * pos_freqs[i]);
    const float ramp = std::clamp((static_cast<float>(i) - low_f) / range_f, 0.0f, 1.0f);
    const float extrapolation_factor = 1.0f - ramp;
    const float a = interpolation * (1.0f - extrapolation_factor);
    const float b = extrapolation * extrapolation_factor;
    out.inv_freq[i] = a + b;
  }
  return out;
}

RopeFrequencies llama3(std::int32_t dim, double theta, const RopeScaling& s) {
  RopeFrequencies out;
  const std::vector<float> p = powers(dim, theta);
  const double old_context = s.original_max_position_embeddings;
  const auto low_wavelen = static_cast<float>(old_context / s.low_freq_factor);
  const auto high_wavelen = static_cast<float>(old_context / s.high_freq_factor);
  const auto factor = static_cast<float>(s.factor);
  const auto two_pi = static_cast<float>(2 * std::numbers::pi);
  const auto old_context_f = static_cast<float>(old_context);
  const auto low_factor = static_cast<float>(s.low_freq_factor);
  const auto smooth_range = static_cast<float>(s.high_freq_factor - s.low_freq_factor);
  out.inv_freq.resize(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) {
    const float inv_freq = 1.0f / p[i];
    const float wavelen = (1.0f / inv_freq) * two_pi;  // 2π / inv_freq: reciprocal, then times 2π
    // Low frequencies are divided by the factor, high ones kept, the band between blended.
    float v = wavelen > low_wavelen ? inv_freq / factor : inv_freq;
    if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) {
      const float smooth = ((1.0f / wavelen) * old_context_f - low_factor) / smooth_range;
      const float a = (1.0f - smooth) * v / factor;
      const float b = smooth * v;
      v = a + b;
    }
    out.inv_freq[i] = v;
  }
  return out;
}

}  // namespace

RopeFrequencies rope_frequencies(std::int32_t head_dim, double theta, const RopeScaling& scaling) {
  assert(head_dim > 0 && head_dim % 2 == 0);
  switch (scaling.type) {
    case RopeType::Yarn: return yarn(head_dim, theta, scaling);
    case RopeType::Llama3: return llama3(head_dim, theta, scaling);
    case RopeType::Default:
    case RopeType::Linear: break;
  }
  RopeFrequencies out;
  out.inv_freq = powers(head_dim, theta);
  const auto factor = static_cast<float>(scaling.factor);
  for (float& f : out.inv_freq) {
    f = 1.0f / f;
    if (scaling.type == RopeType::Linear) f /= factor;
  }
  return out;
}

}  // namespace sy
