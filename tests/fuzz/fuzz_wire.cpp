// Fuzzes the messages between the ranks of a deployment (docs/wire-format.md): the first byte
// picks the message (shipment header, shipment payload, policy, placement, the five remote
// attention messages, an Events batch, the safe-point messages, a heartbeat, a link refusal,
// the bootstrap's Hello and Welcome, and guided decoding's vocabulary), the rest is its body as another rank would send it.
// Any bytes give a message or a named error; a decoded message encodes to bytes that decode to
// the same message (the second encoding equals the first), most to exactly the bytes read, and
// a payload's batches hold columns of one length with activations of exactly their rows.
#include <cstring>
#include <string>

#include "engine/cpu/host_activation_ops.h"
#include "engine/dist/attention_messages.h"
#include "engine/dist/bootstrap_messages.h"
#include "engine/dist/control_messages.h"
#include "engine/dist/event_batch.h"
#include "engine/dist/guide_messages.h"
#include "engine/dist/shipment_codec.h"
#include "engine/dist/wire_format.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using namespace sy;
using namespace sy::dist;

void refused(const Status& s, const char* what) {
  if (s.message().empty()) fuzz_fail("wire", (std::string(what) + ": an error without a message").c_str());
}

// Decodes with `read`, encodes with `write`, decodes and encodes that again: the two encodings
// must be the same bytes.
template <class T, class Read, class Write>
void round_trip(const std::uint8_t* data, std::size_t size, const char* what, Read read, Write write,
                bool exact = false) {
  ByteReader r(data, size);
  T first{};
  if (const Status s = read(r, first); !s.ok()) return refused(s, what);
  const std::string once = write(first);
  if (exact && std::memcmp(once.data() + 1, data, once.size() - 1) != 0)
    fuzz_fail("wire", (std::string(what) + ": encodes to other bytes than it was read from").c_str());
  ByteReader again(once.data() + 1, once.size() - 1);
  T second{};
  if (const Status s = read(again, second); !s.ok())
    fuzz_fail("wire", (std::string(what) + ": its own encoding is refused: " + s.message()).c_str());
  if (again.left() != 0) fuzz_fail("wire", (std::string(what) + ": its own encoding is not read to the end").c_str());
  if (write(second) != once) fuzz_fail("wire", (std::string(what) + ": reads back different").c_str());
}

template <class M>
std::string encoded(const M& m) {
  return encode(m);
}

std::string with_type(MessageType type, ByteWriter& w) {
  return std::string(1, static_cast<char>(type)) + w.bytes();
}

void check_payload(const std::uint8_t* data, std::size_t size) {
  static HostActivationOps ops;
  ByteReader r(data, size);
  Shipment s;
  if (const Status st = decode_payload(r, ops, 0, s); !st.ok()) return refused(st, "payload");
  for (const TokenBatch& b : s.batches) {
    const std::size_t rows = b.row.size();
    // The columns of each kind of batch (wire-format.md): expert rows rank, slot, weight and
    // entry; expert outputs (attention or sampler rows with slots) slot and entry only; others
    // position and rank, a token and a weight optional. An empty batch carries none.
    const std::uint8_t c = b.empty() ? 0 : b.columns;
    bool ok;
    if (b.layer.kind == LayerKind::Expert) {
      ok = rows == 0 || c == kExpertColumns;
    } else if (b.has(kColumnSlot)) {
      ok = c == kOutputColumns;
    } else {
      ok = rows == 0 || ((c & kAttentionColumns) == kAttentionColumns && (c & ~(kAttentionColumns | kColumnToken |
                                                                                  kColumnWeight)) == 0);
    }
    if (!ok) fuzz_fail("wire", "payload: a batch's columns differ in length");
    if (!b.hidden.null() && b.hidden.rows() != static_cast<std::int64_t>(rows))
      fuzz_fail("wire", "payload: activations for another number of rows");
  }
  ByteWriter once;
  encode_payload(once, s);
  ByteReader again(once.bytes().data(), once.bytes().size());
  Shipment back;
  if (const Status st = decode_payload(again, ops, 0, back); !st.ok())
    fuzz_fail("wire", ("payload: its own encoding is refused: " + st.message()).c_str());
  ByteWriter twice;
  encode_payload(twice, back);
  if (twice.bytes() != once.bytes()) fuzz_fail("wire", "payload: reads back different");
}

// The placement shape of fuzz_layout: three blocks, 0 and 2 sparse, four experts.
const Placement& shape() {
  static const Placement p(3, 4, {true, false, true});
  return p;
}

// A Welcome for a world its first byte gives (the reader knows its world from the launcher).
void check_welcome(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return;
  const std::int32_t world = data[0] % 9;
  round_trip<Welcome>(
      data + 1, size - 1, "welcome", [world](ByteReader& r, Welcome& m) { return decode(r, world, m); },
      encoded<Welcome>, true);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t pick = data[0] % 19;
  ++data;
  --size;
  switch (pick) {
    case 0:
      round_trip<ShipmentHeader>(
          data, size, "header", [](ByteReader& r, ShipmentHeader& h) { return decode_header(r, h); },
          [](const ShipmentHeader& h) {
            ByteWriter w;
            encode_header(w, h);
            return with_type(MessageType::Header, w);
          },
          true);
      break;
    case 1:
      check_payload(data, size);
      break;
    case 2:
      round_trip<RuntimePolicy>(
          data, size, "policy", [](ByteReader& r, RuntimePolicy& p) { return get_policy(r, p); },
          [](const RuntimePolicy& p) {
            ByteWriter w;
            put_policy(w, p);
            return with_type(MessageType::Apply, w);
          });
      break;
    case 3:
      round_trip<Placement>(
          data, size, "placement", [](ByteReader& r, Placement& p) { return get_placement(r, shape(), p); },
          [](const Placement& p) {
            ByteWriter w;
            put_placement(w, p);
            return with_type(MessageType::Apply, w);
          });
      break;
    case 4:
      round_trip<SequenceOpen>(
          data, size, "sequence open", [](ByteReader& r, SequenceOpen& m) { return decode(r, m); },
          encoded<SequenceOpen>, true);
      break;
    case 5:
      round_trip<SequenceClose>(
          data, size, "sequence close", [](ByteReader& r, SequenceClose& m) { return decode(r, m); },
          encoded<SequenceClose>, true);
      break;
    case 6:
      round_trip<Sampled>(
          data, size, "sampled", [](ByteReader& r, Sampled& m) { return decode(r, m); }, encoded<Sampled>, true);
      break;
    case 7:
      round_trip<GroupSampled>(
          data, size, "group sampled", [](ByteReader& r, GroupSampled& m) { return decode(r, m); },
          encoded<GroupSampled>, true);
      break;
    case 8:
      round_trip<EventBatch>(
          data, size, "events", [](ByteReader& r, EventBatch& m) { return decode(r, m); }, encoded<EventBatch>, true);
      break;
    case 9:
      round_trip<DrainRequest>(
          data, size, "drain", [](ByteReader& r, DrainRequest& m) { return decode(r, m); }, encoded<DrainRequest>,
          true);
      break;
    case 10:
      round_trip<DrainAnswer>(
          data, size, "drained", [](ByteReader& r, DrainAnswer& m) { return decode(r, m); }, encoded<DrainAnswer>,
          true);
      break;
    case 11:
      round_trip<ApplyChange>(
          data, size, "apply", [](ByteReader& r, ApplyChange& m) { return decode(r, shape(), m); },
          encoded<ApplyChange>);
      break;
    case 12:
      round_trip<ApplyAnswer>(
          data, size, "applied", [](ByteReader& r, ApplyAnswer& m) { return decode(r, m); }, encoded<ApplyAnswer>,
          true);
      break;
    case 13:
      round_trip<Heartbeat>(
          data, size, "heartbeat", [](ByteReader& r, Heartbeat& m) { return decode(r, m); }, encoded<Heartbeat>,
          true);
      break;
    case 14:
      round_trip<LinkRefusal>(
          data, size, "link refusal", [](ByteReader& r, LinkRefusal& m) { return decode(r, m); },
          encoded<LinkRefusal>, true);
      break;
    case 15:
      round_trip<Hello>(
          data, size, "hello", [](ByteReader& r, Hello& m) { return decode(r, m); }, encoded<Hello>, true);
      break;
    case 16:
      check_welcome(data, size);
      break;
    case 17:
      round_trip<PromptScores>(
          data, size, "prompt scores", [](ByteReader& r, PromptScores& m) { return decode(r, m); },
          encoded<PromptScores>, true);
      break;
    default:
      round_trip<GuideVocabulary>(
          data, size, "guided vocabulary", [](ByteReader& r, GuideVocabulary& m) { return decode(r, m); },
          encoded<GuideVocabulary>, true);
      break;
  }
  return 0;
}
