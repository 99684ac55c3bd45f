// The messages between processes: a shipment (metadata and activation rows), policies and
// placements survive encoding and decoding; truncated or inconsistent messages are errors.
#include <gtest/gtest.h>

#include "engine/dist/shipment_codec.h"
#include "tests/runtime/test_configs.h"

namespace sy::dist {
namespace {

using sy::testing::mixtral_like;

Shipment sample_shipment(HostActivationOps& ops) {
  Shipment s{3, 5, LayerKind::Expert, 2, 1, {}};
  for (int b = 0; b < 2; ++b) {
    TokenBatch batch;
    batch.layer = LayerId::expert(2, 4 + b);
    batch.group = 1;
    for (int r = 0; r < 3 + b; ++r) {
      batch.request.push_back(100 + r);
      batch.position.push_back(7 * r);
      batch.rank.push_back(r % 2);
      batch.slot.push_back(r * 2 + b);
      batch.weight.push_back(0.25f * static_cast<float>(r + 1));
    }
    batch.hidden = ops.allocate(batch.rows(), 6);
    float* h = HostActivationOps::data(batch.hidden);
    for (std::int64_t i = 0; i < batch.rows() * 6; ++i) h[i] = static_cast<float>(i) * 0.5f - static_cast<float>(b);
    s.batches.push_back(std::move(batch));
  }
  return s;
}

TEST(WireFormat, ShipmentRoundTripsWithActivations) {
  HostActivationOps ops;
  const Shipment sent = sample_shipment(ops);
  ByteWriter w;
  encode_payload(w, sent);
  ByteReader r(w.bytes().data(), w.bytes().size());
  Shipment got;
  ASSERT_TRUE(decode_payload(r, ops, 42, got).ok());
  EXPECT_EQ(r.left(), 0u);
  EXPECT_EQ(got.src, 3);
  EXPECT_EQ(got.dst, 5);
  EXPECT_EQ(got.kind, LayerKind::Expert);
  EXPECT_EQ(got.block, 2);
  EXPECT_EQ(got.group, 1);
  ASSERT_EQ(got.batches.size(), sent.batches.size());
  for (std::size_t b = 0; b < sent.batches.size(); ++b) {
    const TokenBatch& x = sent.batches[b];
    const TokenBatch& y = got.batches[b];
    EXPECT_EQ(y.layer, x.layer);
    EXPECT_EQ(y.group, x.group);
    EXPECT_EQ(y.oldest_ns, 42);
    EXPECT_EQ(y.request, x.request);
    EXPECT_EQ(y.position, x.position);
    EXPECT_EQ(y.rank, x.rank);
    EXPECT_EQ(y.slot, x.slot);
    EXPECT_EQ(y.weight, x.weight);
    EXPECT_TRUE(y.token.empty());
    ASSERT_EQ(y.hidden.rows(), x.hidden.rows());
    ASSERT_EQ(y.hidden.width(), x.hidden.width());
    const float* a = HostActivationOps::data(x.hidden);
    const float* c = HostActivationOps::data(y.hidden);
    for (std::int64_t i = 0; i < x.hidden.rows() * x.hidden.width(); ++i) EXPECT_EQ(a[i], c[i]) << i;
  }
}

TEST(WireFormat, EmptyBarrierShipmentAndHeaderRoundTrip) {
  HostActivationOps ops;
  const Shipment sent{0, 4, LayerKind::Attention, 3, 7, {}};
  ByteWriter w;
  encode_payload(w, sent);
  ByteReader r(w.bytes().data(), w.bytes().size());
  Shipment got;
  ASSERT_TRUE(decode_payload(r, ops, 0, got).ok());
  EXPECT_TRUE(got.batches.empty());
  EXPECT_EQ(got.group, 7);

  const ShipmentHeader h{1, 2, LayerKind::Sampler, 4, -1, 9, 9 * 256};
  ByteWriter hw;
  encode_header(hw, h);
  ByteReader hr(hw.bytes().data(), hw.bytes().size());
  ShipmentHeader back;
  ASSERT_TRUE(decode_header(hr, back).ok());
  EXPECT_EQ(back.src, 1);
  EXPECT_EQ(back.dst, 2);
  EXPECT_EQ(back.kind, LayerKind::Sampler);
  EXPECT_EQ(back.rows, 9);
  EXPECT_EQ(back.bytes, 9 * 256);
}

TEST(WireFormat, EveryTruncationIsAnError) {
  HostActivationOps ops;
  const Shipment sent = sample_shipment(ops);
  ByteWriter w;
  encode_payload(w, sent);
  const std::string& bytes = w.bytes();
  for (std::size_t n = 0; n < bytes.size(); n += 7) {
    ByteReader r(bytes.data(), n);
    Shipment got;
    EXPECT_FALSE(decode_payload(r, ops, 0, got).ok()) << "decoded " << n << " of " << bytes.size() << " bytes";
  }
}

TEST(WireFormat, ColumnsOfDifferentLengthsAreRefused) {
  HostActivationOps ops;
  Shipment s = sample_shipment(ops);
  s.batches[0].position.pop_back();
  ByteWriter w;
  encode_payload(w, s);
  ByteReader r(w.bytes().data(), w.bytes().size());
  Shipment got;
  const Status st = decode_payload(r, ops, 0, got);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("columns"), std::string::npos) << st.message();
}

TEST(WireFormat, PolicyAndPlacementRoundTrip) {
  RuntimePolicy p;
  p.kind = PolicyKind::PingPong;
  p.microbatches = 3;
  p.scheduler.name = "mtfs";
  p.scheduler.lookahead = 5;
  p.scheduler.decay = 0.75;
  p.collective_barrier = false;
  p.gate = true;
  p.adaptive = true;
  ByteWriter w;
  put_policy(w, p);
  const ModelConfig config = mixtral_like();
  Placement placement(config);
  for (std::int32_t b = 0; b < config.num_layers; ++b) {
    if (!config.is_sparse(b)) continue;
    for (std::int32_t e = 0; e < config.num_experts; ++e) ASSERT_TRUE(placement.set(b, e, {e % 3, 3 + b % 2}).ok());
  }
  put_placement(w, placement);
  ByteReader r(w.bytes().data(), w.bytes().size());
  RuntimePolicy q;
  ASSERT_TRUE(get_policy(r, q).ok());
  EXPECT_EQ(q.kind, PolicyKind::PingPong);
  EXPECT_EQ(q.microbatches, 3);
  EXPECT_EQ(q.scheduler.name, "mtfs");
  EXPECT_EQ(q.scheduler.lookahead, 5);
  EXPECT_EQ(q.scheduler.decay, 0.75);
  EXPECT_FALSE(q.collective_barrier);
  EXPECT_TRUE(q.gate);
  EXPECT_TRUE(q.adaptive);
  Placement back;
  ASSERT_TRUE(get_placement(r, Placement(config), back).ok());
  EXPECT_EQ(back, placement);
  EXPECT_EQ(r.left(), 0u);
}

TEST(WireFormat, APlacementForAnotherModelIsRefused) {
  const ModelConfig config = mixtral_like();
  ModelConfig other = config;
  other.num_experts = config.num_experts * 2;
  ByteWriter w;
  put_placement(w, Placement(other));
  ByteReader r(w.bytes().data(), w.bytes().size());
  Placement back;
  const Status st = get_placement(r, Placement(config), back);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("experts"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace sy::dist
