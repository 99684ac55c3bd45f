// The bootstrap's messages (docs/wire-format.md, types 1–3): a rank's Hello to rank 0 with what
// it runs and where it listens, and rank 0's Welcome (every rank's endpoint) or Refusal (why).
// Apart from the rendezvous, so that their checks can be tested and fuzzed on their own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/dist/wire_format.h"

namespace sy::dist {

// What a rank runs; every rank of a deployment must agree on all of it.
struct RunIdentity {
  std::string model;             // a name for messages (the model directory)
  std::uint64_t model_digest = 0;  // config.json and the weight files' sizes
  std::string layout;            // the layout's name
  std::uint64_t layout_digest = 0;  // the layout's text, rank assignment included
  std::string layout_text;          // that text, so that a mismatch can name the first line that differs
  std::string command;           // the serving command and the options that must match
  std::uint64_t command_digest = 0;
  bool operator==(const RunIdentity&) const = default;
};

struct Hello {
  std::uint32_t version = 0;  // kWireVersion
  std::int32_t rank = 0;
  std::int32_t world = 0;
  RunIdentity identity;
  std::string endpoint;  // its data socket, tcp://HOST:PORT
  std::string memory;    // its device memory identity (LinkExchange::memory)
  bool operator==(const Hello&) const = default;
};

// Every rank's data endpoint and device memory identity by rank, then rank 0's link setup bytes.
struct Welcome {
  std::vector<std::string> endpoints, memories;
  std::string link_setup;
  bool operator==(const Welcome&) const = default;
};

// Whether `endpoint` is what a rank's data socket gives others to connect to: tcp://HOST:PORT
// with a host name or IPv4 address and a port in [1, 65535]. Rank 0 hands it to every rank.
bool is_data_endpoint(const std::string& endpoint);

// Each encoder writes the whole message, type byte first; each decoder reads the body after the
// type byte. A Hello of another wire version is refused naming both versions, as is one with a
// negative rank or world, or an endpoint that is no data endpoint; a Welcome holds `world`
// ranks' endpoints, each a data endpoint.
std::string encode(const Hello& m);
std::string encode(const Welcome& m);
std::string encode_refusal(const std::string& why);
Status decode(ByteReader& r, Hello& m);
Status decode(ByteReader& r, std::int32_t world, Welcome& m);

}  // namespace sy::dist
