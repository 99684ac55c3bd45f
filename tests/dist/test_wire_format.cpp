// The messages between processes: a shipment (metadata and activation rows), policies and
// placements survive encoding and decoding; truncated or inconsistent messages are errors.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <limits>
#include <iterator>

#include "engine/cpu/host_activation_ops.h"
#include <nlohmann/json.hpp>

#include "engine/dist/attention_messages.h"
#include "engine/dist/guide_messages.h"
#include "engine/dist/shipment_codec.h"
#include "engine/structured/schema_compiler.h"
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
    batch.columns = kExpertColumns;
    for (int r = 0; r < 3 + b; ++r)
      batch.row.push_back(
          {.request = 100 + r, .rank = r % 2, .slot = r * 2 + b, .weight = 0.25f * static_cast<float>(r + 1), .entry = 7 * r + b});
    batch.hidden = ops.allocate(batch.rows(), 6);
    float* h = HostActivationOps::data(batch.hidden);
    for (std::int64_t i = 0; i < batch.rows() * 6; ++i) h[i] = static_cast<float>(i) * 0.5f - static_cast<float>(b);
    s.batches.push_back(std::move(batch));
  }
  return s;
}

// One batch as the wire holds it (docs/wire-format.md): an array per column, each of any
// length. A TokenBatch (one record per row) cannot hold columns of different lengths, which a
// foreign or corrupt peer may send: these are written here by hand, from the documented layout.
struct WireBatch {
  LayerId layer;
  std::int32_t group = 0;
  std::vector<std::int64_t> request;
  std::vector<std::int32_t> position, rank, token, slot;
  std::vector<float> weight;
  std::vector<std::int32_t> entry;
  std::vector<float> hidden;  // rows × width
  std::int64_t width = 0;
};

template <class T>
std::vector<T> column(const TokenBatch& b, TokenColumn c, T TokenRow::*field) {
  std::vector<T> v;
  if (c == 0 || b.has(c))
    for (const TokenRow& row : b.row) v.push_back(row.*field);
  return v;
}

WireBatch wire_batch(const TokenBatch& b) {
  WireBatch w;
  w.layer = b.layer;
  w.group = b.group;
  w.request = column(b, TokenColumn{}, &TokenRow::request);
  w.position = column(b, kColumnPosition, &TokenRow::position);
  w.rank = column(b, kColumnRank, &TokenRow::rank);
  w.token = column(b, kColumnToken, &TokenRow::token);
  w.slot = column(b, kColumnSlot, &TokenRow::slot);
  w.weight = column(b, kColumnWeight, &TokenRow::weight);
  w.entry = column(b, kColumnEntry, &TokenRow::entry);
  if (!b.hidden.null()) {
    const float* h = HostActivationOps::data(b.hidden);
    w.hidden.assign(h, h + b.hidden.rows() * b.hidden.width());
    w.width = b.hidden.width();
  }
  return w;
}

// A payload of the shipment's header fields and these batches, byte by byte as the format says.
std::string wire_payload(const Shipment& s, const std::vector<WireBatch>& batches) {
  ByteWriter w;
  w.put<std::int32_t>(s.src);
  w.put<std::int32_t>(s.dst);
  w.put<std::uint8_t>(static_cast<std::uint8_t>(s.kind));
  w.put<std::int32_t>(s.block);
  w.put<std::int32_t>(s.group);
  w.put<std::uint8_t>(0);  // rows in the message
  w.put<std::uint32_t>(static_cast<std::uint32_t>(batches.size()));
  for (const WireBatch& b : batches) {
    w.put<std::uint8_t>(static_cast<std::uint8_t>(b.layer.kind));
    w.put<std::int32_t>(b.layer.block);
    w.put<std::int32_t>(b.layer.index);
    w.put<std::int32_t>(b.group);
    w.put_array(b.request);
    w.put_array(b.position);
    w.put_array(b.rank);
    w.put_array(b.token);
    w.put_array(b.slot);
    w.put_array(b.weight);
    w.put_array(b.entry);
    const std::int64_t rows = b.width > 0 ? static_cast<std::int64_t>(b.hidden.size()) / b.width : 0;
    w.put<std::int64_t>(rows);
    w.put<std::int64_t>(b.width);
    w.put_raw(b.hidden.data(), b.hidden.size() * sizeof(float));
  }
  return w.bytes();
}

std::vector<WireBatch> wire_batches(const Shipment& s) {
  std::vector<WireBatch> v;
  for (const TokenBatch& b : s.batches) v.push_back(wire_batch(b));
  return v;
}

Status decode_wire(HostActivationOps& ops, const Shipment& s, const std::vector<WireBatch>& batches, Shipment& got) {
  const std::string bytes = wire_payload(s, batches);
  ByteReader r(bytes.data(), bytes.size());
  return decode_payload(r, ops, 0, got);
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
    EXPECT_EQ(y.columns, kExpertColumns);
    ASSERT_EQ(y.rows(), x.rows());
    for (std::int64_t i = 0; i < x.rows(); ++i) {
      EXPECT_EQ(y.at(i).request, x.at(i).request);
      EXPECT_EQ(y.at(i).rank, x.at(i).rank);
      EXPECT_EQ(y.at(i).slot, x.at(i).slot);
      EXPECT_EQ(y.at(i).weight, x.at(i).weight);
      EXPECT_EQ(y.at(i).entry, x.at(i).entry);
    }
    ASSERT_EQ(y.hidden.rows(), x.hidden.rows());
    ASSERT_EQ(y.hidden.width(), x.hidden.width());
    const float* a = HostActivationOps::data(x.hidden);
    const float* c = HostActivationOps::data(y.hidden);
    for (std::int64_t i = 0; i < x.hidden.rows() * x.hidden.width(); ++i) EXPECT_EQ(a[i], c[i]) << i;
  }
}

// The encoder writes the documented layout, an array per column (the columns a batch lacks
// empty), whatever the rows carry in the fields their kind leaves out.
TEST(WireFormat, EachKindOfBatchIsEncodedAsTheFormatsColumns) {
  HostActivationOps ops;
  Shipment s = sample_shipment(ops);
  s.batches[0].row[1].position = 9;  // not a column of expert rows: not sent
  {
    ByteWriter w;
    encode_payload(w, s);
    EXPECT_EQ(w.bytes(), wire_payload(s, wire_batches(s)));
  }
  s.kind = LayerKind::Attention;
  for (TokenBatch& b : s.batches) {
    b.layer = LayerId::attention(0, 1);
    b.columns = kAttentionColumns | kColumnToken;
    for (TokenRow& row : b.row) {
      row.position = static_cast<std::int32_t>(row.request) - 90;
      row.token = 7;
    }
  }
  s.batches[1].columns = kOutputColumns;
  ByteWriter w;
  encode_payload(w, s);
  const std::vector<WireBatch> wire = wire_batches(s);
  EXPECT_EQ(wire[0].token.size(), 3u);
  EXPECT_TRUE(wire[1].position.empty() && wire[1].rank.empty() && wire[1].weight.empty() && wire[1].slot.size() == 4u &&
              wire[1].entry.size() == 4u);
  EXPECT_TRUE(wire[0].entry.empty());
  EXPECT_EQ(w.bytes(), wire_payload(s, wire));
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
  s.kind = LayerKind::Attention;
  std::vector<WireBatch> wire = wire_batches(s);
  for (WireBatch& b : wire) {
    b.layer = LayerId::attention(2, 1);
    b.slot.clear();
    b.weight.clear();
    b.entry.clear();
    b.position.assign(b.request.size(), 4);
  }
  Shipment got;
  ASSERT_TRUE(decode_wire(ops, s, wire, got).ok());
  wire[0].position.pop_back();
  const Status st = decode_wire(ops, s, wire, got);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("columns"), std::string::npos) << st.message();
}

TEST(WireFormat, ExpertRowsWithoutRanksSlotsWeightsOrEntriesOrWithPositionsOrTokensAreRefused) {
  // The expert dispatch reads a rank, a slot, a weight and a token-pool entry per expert row;
  // expert rows carry no position and no token.
  HostActivationOps ops;
  const Shipment sample = sample_shipment(ops);
  for (int variant = 0; variant < 6; ++variant) {
    std::vector<WireBatch> wire = wire_batches(sample);
    WireBatch& b = wire[1];
    if (variant == 0) b.slot.clear();
    if (variant == 1) b.weight.clear();
    if (variant == 2) b.token.assign(b.request.size(), 5);
    if (variant == 3) b.rank.pop_back();
    if (variant == 4) b.position.assign(b.request.size(), 3);
    if (variant == 5) b.entry.pop_back();
    Shipment got;
    const Status st = decode_wire(ops, sample, wire, got);
    EXPECT_FALSE(st.ok()) << "variant " << variant;
    EXPECT_NE(st.message().find("expert batch"), std::string::npos) << st.message();
  }
  // Attention rows may carry tokens and no slots (block 0's rows).
  Shipment s = sample_shipment(ops);
  for (TokenBatch& b : s.batches) {
    b.layer = LayerId::attention(0, 1);
    b.columns = kAttentionColumns | kColumnToken;
    for (TokenRow& row : b.row) {
      row.position = 2;
      row.token = 9;
    }
  }
  s.kind = LayerKind::Attention;
  ByteWriter w;
  encode_payload(w, s);
  ByteReader r(w.bytes().data(), w.bytes().size());
  Shipment got;
  ASSERT_TRUE(decode_payload(r, ops, 0, got).ok());
  ASSERT_EQ(got.batches.size(), 2u);
  EXPECT_EQ(got.batches[1].columns, kAttentionColumns | kColumnToken);
  EXPECT_EQ(got.batches[1].at(3).token, 9);
  EXPECT_EQ(got.batches[1].at(3).position, 2);
  EXPECT_EQ(got.batches[1].at(3).rank, 1);
}

TEST(WireFormat, ExpertOutputsCarryRequestSlotAndEntryOnly) {
  // Rows going back from an expert to its attention rank's token pool (the expert dispatch
  // sends request, slot and token-pool entry per row): they decode as sent, with their
  // activations.
  HostActivationOps ops;
  const auto outputs = [&ops] {
    Shipment s = sample_shipment(ops);
    s.kind = LayerKind::Attention;
    for (TokenBatch& b : s.batches) {
      b.layer = LayerId::attention(3, 1);
      b.columns = kOutputColumns;
    }
    return s;
  };
  const Shipment sent = outputs();
  ByteWriter w;
  encode_payload(w, sent);
  ByteReader r(w.bytes().data(), w.bytes().size());
  Shipment got;
  ASSERT_TRUE(decode_payload(r, ops, 0, got).ok());
  ASSERT_EQ(got.batches.size(), sent.batches.size());
  for (std::size_t b = 0; b < sent.batches.size(); ++b) {
    const TokenBatch& x = sent.batches[b];
    const TokenBatch& y = got.batches[b];
    EXPECT_EQ(y.columns, kOutputColumns);
    ASSERT_EQ(y.rows(), x.rows());
    for (std::int64_t i = 0; i < x.rows(); ++i) {
      EXPECT_EQ(y.at(i).request, x.at(i).request);
      EXPECT_EQ(y.at(i).slot, x.at(i).slot);
      EXPECT_EQ(y.at(i).entry, x.at(i).entry);
    }
    EXPECT_EQ(y.hidden.rows(), x.hidden.rows());
  }
  // Any other column on them, or a slot or an entry short of a row, is refused.
  for (int variant = 0; variant < 6; ++variant) {
    std::vector<WireBatch> wire = wire_batches(sent);
    WireBatch& b = wire[1];
    const auto rows = b.request.size();
    if (variant == 0) b.position.assign(rows, 1);
    if (variant == 1) b.rank.assign(rows, 1);
    if (variant == 2) b.weight.assign(rows, 0.5f);
    if (variant == 3) b.token.assign(rows, 7);
    if (variant == 4) b.slot.pop_back();
    if (variant == 5) b.entry.pop_back();
    Shipment bad;
    const Status st = decode_wire(ops, sent, wire, bad);
    EXPECT_FALSE(st.ok()) << "variant " << variant;
    EXPECT_NE(st.message().find("expert output"), std::string::npos) << st.message();
  }
}

TEST(WireFormat, ANegativeTokenPoolEntryIsRefused) {
  // An entry indexes the receiving rank's token pool: a negative one indexes nothing.
  HostActivationOps ops;
  const Shipment sample = sample_shipment(ops);
  std::vector<WireBatch> wire = wire_batches(sample);
  Shipment got;
  ASSERT_TRUE(decode_wire(ops, sample, wire, got).ok());
  wire[0].entry[1] = -3;
  const Status st = decode_wire(ops, sample, wire, got);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("entry"), std::string::npos) << st.message();
}

// The rows travel as the floats' own bytes, the last batch's at the message's end: what the
// cpu backend sent before rows went through copy_to_host, so cpu ranks stay bit-identical.
TEST(WireFormat, RowsTravelAsTheirFloatsBytes) {
  HostActivationOps ops;
  const Shipment sent = sample_shipment(ops);
  ByteWriter w;
  encode_payload(w, sent);
  const Activations& last = sent.batches.back().hidden;
  const auto n = static_cast<std::size_t>(last.rows() * last.width()) * sizeof(float);
  ASSERT_GE(w.bytes().size(), n);
  EXPECT_EQ(std::memcmp(w.bytes().data() + w.bytes().size() - n, HostActivationOps::data(last), n), 0);
}

// Each shipment's rows land in the memory its destination device's backend names; a shipment
// for a device this process does not run is refused, naming it.
TEST(WireFormat, RowsArriveInTheDestinationsOps) {
  HostActivationOps ops, arrivals;
  const Shipment sent = sample_shipment(ops);  // for device 5
  ByteWriter w;
  encode_payload(w, sent);
  {
    ByteReader r(w.bytes().data(), w.bytes().size());
    Shipment got;
    const ArrivalOps to = [&](std::int32_t dst) -> ActivationOps* { return dst == 5 ? &arrivals : nullptr; };
    ASSERT_TRUE(decode_payload(r, to, 0, got).ok());
    for (const TokenBatch& b : got.batches) EXPECT_EQ(&b.hidden.owner(), &arrivals);
  }
  ByteReader r(w.bytes().data(), w.bytes().size());
  Shipment got;
  const Status st = decode_payload(r, [](std::int32_t) -> ActivationOps* { return nullptr; }, 0, got);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("device 5"), std::string::npos) << st.message();
}

// Between ranks joined by device links (NCCL) the payload carries each batch's shape but not its
// floats; the receiver allocates the rows in its destination's memory and lists them, in batch
// order, for the link's receive. A process without device links refuses such a payload.
TEST(WireFormat, RowsOverADeviceLinkTravelAsShapesOnly) {
  HostActivationOps ops, arrivals;
  Shipment sent = sample_shipment(ops);
  TokenBatch empty;  // a batch without rows between the two with rows: not listed
  empty.layer = LayerId::expert(2, 9);
  sent.batches.insert(sent.batches.begin() + 1, std::move(empty));
  ByteWriter inline_rows, linked;
  encode_payload(inline_rows, sent);
  encode_payload(linked, sent, /*rows_over_link=*/true);
  const std::size_t floats = static_cast<std::size_t>(sent.batches[0].hidden.rows() * 6 + sent.batches[2].hidden.rows() * 6);
  EXPECT_EQ(linked.bytes().size() + floats * sizeof(float), inline_rows.bytes().size());

  const ArrivalOps to = [&](std::int32_t) -> ActivationOps* { return &arrivals; };
  {
    ByteReader r(linked.bytes().data(), linked.bytes().size());
    Shipment got;
    const Status st = decode_payload(r, to, 0, got);
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find("device link"), std::string::npos) << st.message();
  }
  ByteReader r(linked.bytes().data(), linked.bytes().size());
  Shipment got;
  std::vector<Activations*> over_link;
  ASSERT_TRUE(decode_payload(r, to, 0, got, &over_link).ok());
  EXPECT_EQ(r.left(), 0u);
  ASSERT_EQ(got.batches.size(), 3u);
  EXPECT_TRUE(got.batches[1].hidden.null());
  ASSERT_EQ(over_link.size(), 2u);
  EXPECT_EQ(over_link[0], &got.batches[0].hidden);
  EXPECT_EQ(over_link[1], &got.batches[2].hidden);
  for (std::size_t b : {0u, 2u}) {
    EXPECT_EQ(&got.batches[b].hidden.owner(), &arrivals);
    EXPECT_EQ(got.batches[b].hidden.rows(), sent.batches[b].hidden.rows());
    EXPECT_EQ(got.batches[b].hidden.width(), 6);
    ASSERT_EQ(got.batches[b].rows(), sent.batches[b].rows());
    for (std::int64_t i = 0; i < sent.batches[b].rows(); ++i) EXPECT_EQ(got.batches[b].at(i).request, sent.batches[b].at(i).request);
  }
  // Rows inline decode as before, listing nothing.
  ByteReader ri(inline_rows.bytes().data(), inline_rows.bytes().size());
  Shipment got_inline;
  std::vector<Activations*> none;
  ASSERT_TRUE(decode_payload(ri, to, 0, got_inline, &none).ok());
  EXPECT_TRUE(none.empty());
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

// Decodes the body of an encoded message (after its type byte).
template <class M>
Status decode_body(const std::string& bytes, M& out) {
  ByteReader r(bytes.data() + 1, bytes.size() - 1);
  SY_RETURN_IF_ERROR(decode(r, out));
  return r.left() == 0 ? Status::Ok() : Status::Error("bytes left over");
}

TEST(WireFormat, RemoteAttentionMessagesRoundTrip) {
  const SequenceOpen open{1, 42, {5, 6, 7}, SamplingSpec{0.7f, 0.9f, 40, 1234, 3, 0.05f, -0.5f, 1.25f, 1.1f}, {9, 8, 9},
                          {{4, -100.0f}, {11, 2.5f}}, 3, nullptr};
  SequenceOpen open_back;
  const std::string open_bytes = encode(open);
  EXPECT_EQ(static_cast<MessageType>(open_bytes[0]), MessageType::SequenceOpen);
  ASSERT_TRUE(decode_body(open_bytes, open_back).ok());
  EXPECT_EQ(open_back, open);

  SequenceClose close_back;
  ASSERT_TRUE(decode_body(encode(SequenceClose{2, 9}), close_back).ok());
  EXPECT_EQ(close_back, (SequenceClose{2, 9}));

  kernels::TokenLogprobs lp{17, -0.25f, {{17, -0.25f}, {3, -1.5f}}};
  // Token −1: a chunk of the prompt that is not its last passed the sampler (chunked prefill).
  for (const Sampled& m : {Sampled{42, 17, std::nullopt}, Sampled{42, 17, lp}, Sampled{42, -1, std::nullopt}}) {
    Sampled back;
    ASSERT_TRUE(decode_body(encode(m), back).ok());
    EXPECT_EQ(back, m);
  }
  GroupSampled group_back;
  ASSERT_TRUE(decode_body(encode(GroupSampled{1, 3}), group_back).ok());
  EXPECT_EQ(group_back, (GroupSampled{1, 3}));

  // A request scoring its prompt: the setting travels with its sampling, its prompt with it.
  SamplingSpec scoring;
  scoring.prompt_logprobs = 5;
  const SequenceOpen scored{0, 7, {1}, scoring, {3, 4, 5}, {}, 3, nullptr};
  SequenceOpen scored_back;
  ASSERT_TRUE(decode_body(encode(scored), scored_back).ok());
  EXPECT_EQ(scored_back, scored);

  PromptScores prompt;
  prompt.logprobs.request = 42;
  prompt.logprobs.first_position = 3;
  prompt.logprobs.tokens = {kernels::TokenLogprobs{5, -2.5f, {{9, -0.5f}}, 4}, kernels::TokenLogprobs{6, -0.1f, {}, 1}};
  const std::string prompt_bytes = encode(prompt);
  EXPECT_EQ(static_cast<MessageType>(prompt_bytes[0]), MessageType::PromptScores);
  PromptScores prompt_back;
  ASSERT_TRUE(decode_body(prompt_bytes, prompt_back).ok());
  EXPECT_EQ(prompt_back, prompt);
  EXPECT_EQ(prompt_back.logprobs.tokens[0].rank, 4);

  // What no rank sends: position 0 (it has no score), a rank below 1, a count beyond the bytes.
  PromptScores bad = prompt;
  bad.logprobs.first_position = 0;
  EXPECT_FALSE(decode_body(encode(bad), prompt_back).ok());
  bad = prompt;
  bad.logprobs.tokens[1].rank = 0;
  EXPECT_FALSE(decode_body(encode(bad), prompt_back).ok());
  std::string truncated = encode(prompt);
  truncated.resize(1 + 8 + 4 + 4);
  truncated[1 + 8 + 4] = 100;  // 100 tokens announced, none there
  EXPECT_FALSE(decode_body(truncated, prompt_back).ok());
  SamplingSpec too_many;
  too_many.prompt_logprobs = 21;
  EXPECT_FALSE(decode_body(encode(SequenceOpen{0, 1, {1}, too_many, {}, {}, 0, nullptr}), open_back).ok());
}

// A guided request's grammar travels with its SequenceOpen, the model's vocabulary once per
// process before it; both decode to what was sent.
TEST(WireFormat, GuidedDecodingTravelsToAnotherRank) {
  const auto schema = structured::compile_schema(nlohmann::json::parse(
      R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"enum": ["x", 1, null]},
          "c": {"type": "array", "items": {"$ref": "#/$defs/c"}, "maxItems": 2}}, "required": ["a"],
          "$defs": {"c": {"anyOf": [{"type": "string", "maxLength": 4}, {"$ref": "#/$defs/c"}]}}})"));
  ASSERT_TRUE(schema.ok()) << schema.status().message();
  for (const auto& grammar : {*schema, structured::Grammar::any_object(), structured::Grammar::choice({"yes", "no"})}) {
    SequenceOpen open{1, 42, {5, 6}, {}, {}, {}, 3, grammar};
    SequenceOpen back;
    ASSERT_TRUE(decode_body(encode(open), back).ok());
    ASSERT_NE(back.grammar, nullptr);
    EXPECT_EQ(*back.grammar, *grammar);
    EXPECT_EQ(back, open);
  }
  SequenceOpen plain{1, 42, {5, 6}, {}, {}, {}, 3, nullptr}, plain_back;
  ASSERT_TRUE(decode_body(encode(plain), plain_back).ok());
  EXPECT_EQ(plain_back.grammar, nullptr);

  const structured::TokenVocabulary vocabulary({"{", "}", "\"a\"", "", "1"}, {3});
  const GuideVocabulary sent = GuideVocabulary::of(vocabulary);
  const std::string bytes = encode(sent);
  EXPECT_EQ(static_cast<MessageType>(bytes[0]), MessageType::GuideVocabulary);
  GuideVocabulary got;
  ASSERT_TRUE(decode_body(bytes, got).ok());
  EXPECT_EQ(got, sent);
  const auto built = got.build();
  ASSERT_EQ(built->size(), 5);
  EXPECT_EQ(built->bytes(2), "\"a\"");
  EXPECT_TRUE(built->is_end(3));
}

TEST(WireFormat, GuidedMessagesRefuseWhatNoRankSends) {
  // Grammars the matcher could not walk: a node index out of range, a required property it does
  // not name, a property name with a quote, a negative bound, a root out of range.
  const auto refused = [](structured::Grammar g, const char* what) {
    SequenceOpen back;
    const Status s = decode_body(encode(SequenceOpen{0, 1, {3}, {}, {}, {}, 1,
                                                     std::make_shared<const structured::Grammar>(std::move(g))}),
                                 back);
    EXPECT_FALSE(s.ok()) << what;
    EXPECT_NE(s.message().find("guided request"), std::string::npos) << s.message();
  };
  structured::Grammar g = *structured::Grammar::any_object();
  g.nodes[0].alternatives.push_back(static_cast<std::int32_t>(g.nodes.size()));
  refused(g, "alternative out of range");
  g = *structured::Grammar::any_object();
  g.nodes[static_cast<std::size_t>(g.root)].required = 1;
  refused(g, "required without properties");
  g = *structured::Grammar::any_object();
  g.nodes[static_cast<std::size_t>(g.root)].properties = {{"a\"b", 0}};
  refused(g, "a quote in a name");
  g = *structured::Grammar::choice({"x"});
  g.nodes[0].max_length = -2;
  refused(g, "a negative bound");
  g = *structured::Grammar::choice({"x"});
  g.root = 1;
  refused(g, "root out of range");
  g = structured::Grammar{};
  refused(g, "no nodes");

  // A vocabulary's end token must be one of its ids; counts beyond the bytes are truncation.
  GuideVocabulary v{{"a", "b"}, {2}};
  GuideVocabulary back;
  EXPECT_FALSE(decode_body(encode(v), back).ok());
  v.end_tokens = {-1};
  EXPECT_FALSE(decode_body(encode(v), back).ok());
  const std::string bytes = encode(GuideVocabulary{{"a", "b"}, {1}});
  for (std::size_t n = 1; n < bytes.size(); ++n) EXPECT_FALSE(decode_body(bytes.substr(0, n), back).ok()) << n;
  // A grammar flag other than 0 or 1.
  std::string open = encode(SequenceOpen{0, 1, {3}, {}, {}, {}, 1, nullptr});
  open.back() = 2;
  SequenceOpen open_back;
  EXPECT_FALSE(decode_body(open, open_back).ok());
}

TEST(WireFormat, RemoteAttentionMessagesRefuseWhatNoRankSends) {
  SequenceOpen open;
  EXPECT_FALSE(decode_body(encode(SequenceOpen{0, 1, {3, -1}, {}, {}, {}, 0, nullptr}), open).ok());  // a negative page
  SamplingSpec nan_temperature;
  nan_temperature.temperature = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(decode_body(encode(SequenceOpen{0, 1, {3}, nan_temperature, {}, {}, 0, nullptr}), open).ok());
  SamplingSpec many;
  many.logprobs = kernels::kMaxTopLogprobs + 1;
  EXPECT_FALSE(decode_body(encode(SequenceOpen{0, 1, {3}, many, {}, {}, 0, nullptr}), open).ok());
  SamplingSpec beyond;
  beyond.frequency_penalty = 2.5f;
  EXPECT_FALSE(decode_body(encode(SequenceOpen{0, 1, {3}, beyond, {}, {}, 0, nullptr}), open).ok());
  beyond = {};
  beyond.min_p = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(decode_body(encode(SequenceOpen{0, 1, {3}, beyond, {}, {}, 0, nullptr}), open).ok());
  beyond = {};
  beyond.repetition_penalty = 0.0f;
  EXPECT_FALSE(decode_body(encode(SequenceOpen{0, 1, {3}, beyond, {}, {}, 0, nullptr}), open).ok());
  EXPECT_FALSE(decode_body(encode(SequenceOpen{0, 1, {3}, {}, {4, -2}, {}, 0, nullptr}), open).ok());  // a negative prompt token
  EXPECT_FALSE(decode_body(encode(SequenceOpen{0, 1, {3}, {}, {}, {{2, 101.0f}}, 0, nullptr}), open).ok());  // beyond ±100
  EXPECT_FALSE(decode_body(encode(SequenceOpen{0, 1, {3}, {}, {}, {{-1, 1.0f}}, 0, nullptr}), open).ok());
  EXPECT_FALSE(decode_body(encode(SequenceOpen{0, 1, {3}, {}, {}, {{5, 3.0f}, {5, 4.0f}}, 0, nullptr}), open).ok());  // twice
  EXPECT_FALSE(decode_body(encode(SequenceOpen{0, 1, {3}, {}, {}, {{6, 3.0f}, {5, 4.0f}}, 0, nullptr}), open).ok());  // unsorted
  EXPECT_FALSE(decode_body(encode(SequenceOpen{0, 1, {3}, {}, {}, {}, -1, nullptr}), open).ok());  // a negative prompt length

  kernels::TokenLogprobs lp{1, -0.5f, {}};
  lp.top.assign(static_cast<std::size_t>(kernels::kMaxTopLogprobs) + 1, {1, -0.5f});
  Sampled sampled;
  const Status too_many = decode_body(encode(Sampled{1, 1, lp}), sampled);
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.message().find("at most 20"), std::string::npos) << too_many.message();
  EXPECT_FALSE(decode_body(encode(Sampled{1, -2, std::nullopt}), sampled).ok());  // below kNoToken
  EXPECT_FALSE(decode_body(encode(Sampled{1, 1, kernels::TokenLogprobs{-1, -0.5f, {}}}), sampled).ok());

  // Every proper prefix of a message is truncated.
  const std::string bytes = encode(SequenceOpen{1, 42, {5, 6, 7}, {}, {}, {}, 0, nullptr});
  for (std::size_t n = 1; n < bytes.size(); ++n) {
    SequenceOpen cut;
    EXPECT_FALSE(decode_body(bytes.substr(0, n), cut).ok()) << n;
  }
}

// The fuzz target's committed seeds (tests/fuzz/corpus/wire) are messages that decode: the
// replay starts from inputs that reach past the first field.
TEST(WireFormat, FuzzSeedsOfTheAttentionMessagesDecode) {
  const std::string dir = std::string(SY_SOURCE_DIR) + "/tests/fuzz/corpus/wire/";
  const auto read = [&](const char* name) {
    std::ifstream in(dir + name, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  SequenceOpen open;
  EXPECT_TRUE(decode_body(read("sequence-open"), open).ok());
  Sampled sampled;
  EXPECT_TRUE(decode_body(read("sampled-logprobs"), sampled).ok());
  ASSERT_TRUE(sampled.logprobs.has_value());
  EXPECT_EQ(sampled.logprobs->top.size(), 2u);
  GroupSampled group;
  EXPECT_TRUE(decode_body(read("group-sampled"), group).ok());
  PromptScores prompt;
  EXPECT_TRUE(decode_body(read("prompt-scores"), prompt).ok());
  EXPECT_EQ(prompt.logprobs.tokens.size(), 2u);
  SequenceOpen guided;
  ASSERT_TRUE(decode_body(read("sequence-open-guided"), guided).ok());
  ASSERT_NE(guided.grammar, nullptr);
  EXPECT_EQ(guided.grammar->nodes[0].texts, (std::vector<std::string>{"yes", "no"}));
  GuideVocabulary vocabulary;
  ASSERT_TRUE(decode_body(read("guide-vocabulary"), vocabulary).ok());
  EXPECT_EQ(vocabulary.bytes.size(), 8u);
}

}  // namespace
}  // namespace sy::dist
