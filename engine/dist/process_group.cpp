#include "engine/dist/process_group.h"

#include <cassert>
#include <cstdio>
#include <memory>

#include "engine/dist/attention_messages.h"
#include "engine/dist/control_messages.h"
#include "engine/dist/guide_messages.h"

namespace sy::dist {
namespace {

constexpr std::int64_t kDrainRetryNs = 1'000'000;  // between drain rounds that found work

void complain(std::int32_t rank, const char* what, const Status& s) {
  std::fprintf(stderr, "switchyard: rank %d: bad %s message: %s\n", rank, what, s.message().c_str());
}

}  // namespace

ProcessGroup::ProcessGroup(ProcessLinks& links, EventLoop& loop, Cluster& cluster, ZmqTransport& transport)
    : links_(links), loop_(loop), cluster_(cluster), transport_(transport) {
  loop_.begin_outside_work();
  holding_loop_ = true;
  const std::int32_t me = links_.rank();
  if (me == 0) {
    links_.on(MessageType::Drained, [this, me](ByteReader& r) {
      DrainAnswer m;
      Status s = decode(r, m);
      if (s.ok() && (m.rank <= 0 || m.rank >= links_.world())) s = Status::Error("rank " + std::to_string(m.rank));
      if (!s.ok()) return complain(me, "drained", s);
      loop_.post_external([this, m] { on_drained(m.epoch, m.rank, RankState{m.quiescent, m.sent, m.received}); });
    });
    links_.on(MessageType::Applied, [this, me](ByteReader& r) {
      ApplyAnswer m;
      if (const Status s = decode(r, m); !s.ok()) return complain(me, "applied", s);
      loop_.post_external([this, m] { on_applied(m.epoch); });
    });
    // Tokens sampled on attention devices of other ranks go to the coordinator's hooks, in the
    // order each rank sampled them.
    links_.on(MessageType::Sampled, [this, me](ByteReader& r) {
      Sampled m;
      if (const Status s = decode(r, m); !s.ok()) return complain(me, "sampled", s);
      loop_.post_external([this, me, m = std::move(m)] {
        ++received_;
        // The coordinator indexes its records by the request: one no remote rank holds, or a
        // token beyond the model, is a peer's bug that must not reach it.
        if (const Status s = check_sampled(cluster_, m); !s.ok()) return complain(me, "sampled", s);
        cluster_.hooks().on_sampled(m.request, m.token, m.logprobs ? &*m.logprobs : nullptr);
      });
    });
    // Before the Sampled of the same execution, on the same ordered link.
    links_.on(MessageType::PromptScores, [this, me](ByteReader& r) {
      PromptScores m;
      if (const Status s = decode(r, m); !s.ok()) return complain(me, "prompt scores", s);
      loop_.post_external([this, m = std::move(m)] {
        ++received_;
        if (cluster_.hooks().on_prompt_logprobs) cluster_.hooks().on_prompt_logprobs(m.logprobs);
      });
    });
    links_.on(MessageType::GroupSampled, [this, me](ByteReader& r) {
      GroupSampled m;
      if (const Status s = decode(r, m); !s.ok()) return complain(me, "group sampled", s);
      loop_.post_external([this, me, m] {
        ++received_;
        if (m.rank < 0 || m.rank >= cluster_.topology().num_ranks())
          return complain(me, "group sampled", Status::Error("attention rank " + std::to_string(m.rank)));
        cluster_.hooks().on_group_sampled(m.rank, m.group);
      });
    });
    return;
  }
  serve_attention();
  links_.on(MessageType::Drain, [this, me](ByteReader& r) {
    DrainRequest m;
    if (const Status s = decode(r, m); !s.ok()) return complain(me, "drain", s);
    loop_.post_external([this, m] { answer_drain(m.epoch); });
  });
  links_.on(MessageType::Apply, [this, me](ByteReader& r) {
    auto m = std::make_shared<ApplyChange>();
    if (const Status s = decode(r, cluster_.topology().placement, *m); !s.ok()) return complain(me, "apply", s);
    loop_.post_external([this, m] { apply_remote(m->epoch, m->policy, m->placement); });
  });
  links_.on(MessageType::Shutdown, [this](ByteReader&) {
    // Rank 0 stops beating as it sends this: from here its silence is the run's end, not a
    // death, however long this rank's loop takes to reach end_outside_work (a loaded host).
    links_.departed(0);
    loop_.post_external([this] { end_outside_work(); });
  });
}

ProcessGroup::~ProcessGroup() = default;

void ProcessGroup::end_outside_work() {
  if (!holding_loop_) return;
  holding_loop_ = false;
  loop_.end_outside_work();
}

void ProcessGroup::broadcast(const std::string& m) {
  for (std::int32_t r = 0; r < links_.world(); ++r)
    if (r != links_.rank()) links_.send(r, m);
}

void ProcessGroup::apply(std::function<void()> apply_here, const RuntimePolicy& policy, const Placement* placement,
                         std::function<void()> released) {
  assert(links_.rank() == 0 && !change_);
  change_ = Change{std::move(apply_here), policy, placement ? std::optional<Placement>(*placement) : std::nullopt,
                   std::move(released)};
  previous_clean_ = false;
  start_drain_round();
}

void ProcessGroup::start_drain_round() {
  ++epoch_;
  ++drain_rounds_;
  round_.assign(static_cast<std::size_t>(links_.world()), std::nullopt);
  broadcast(encode(DrainRequest{epoch_}));
}

void ProcessGroup::on_drained(std::uint64_t epoch, std::int32_t rank, RankState state) {
  if (!change_ || epoch != epoch_) return;  // an answer to an earlier round
  round_[static_cast<std::size_t>(rank)] = state;
  for (std::int32_t r = 1; r < links_.world(); ++r)
    if (!round_[static_cast<std::size_t>(r)]) return;
  // Every rank answered: this process's own state completes the round.
  std::vector<RankState> states;
  states.push_back(own_state());
  std::uint64_t sent = 0, received = 0;
  bool quiescent = true;
  for (std::int32_t r = 1; r < links_.world(); ++r) states.push_back(*round_[static_cast<std::size_t>(r)]);
  for (const RankState& s : states) {
    sent += s.sent;
    received += s.received;
    quiescent = quiescent && s.quiescent;
  }
  const bool clean = quiescent && sent == received;
  // Counters read at different moments can balance by accident while a shipment travels; two
  // clean rounds in a row with nothing changed in between cannot.
  if (clean && previous_clean_ && states == previous_) {
    change_->apply_here();
    acks_ = 0;
    ++epoch_;
    broadcast(encode(ApplyChange{epoch_, change_->policy, change_->placement}));
    return;
  }
  previous_clean_ = clean;
  previous_ = std::move(states);
  if (clean) {
    start_drain_round();
  } else {
    loop_.post(loop_.now() + kDrainRetryNs, [this] {
      if (change_) start_drain_round();
    });
  }
}

void ProcessGroup::on_applied(std::uint64_t epoch) {
  if (!change_ || epoch != epoch_) return;
  if (++acks_ < links_.world() - 1) return;
  auto released = std::move(change_->released);
  change_.reset();
  released();
}

void ProcessGroup::answer_drain(std::uint64_t epoch) {
  const RankState state = own_state();
  links_.send(0, encode(DrainAnswer{epoch, links_.rank(), state.quiescent, state.sent, state.received}));
}

void ProcessGroup::apply_remote(std::uint64_t epoch, const RuntimePolicy& policy,
                                const std::optional<Placement>& placement) {
  // Rank 0 only asks after two clean drain rounds: nothing runs or travels anywhere.
  if (!cluster_.quiescent()) {
    std::fprintf(stderr, "switchyard: rank %d: asked to apply a change while not at a safe point\n", links_.rank());
    return;
  }
  if (placement) cluster_.set_placement(*placement);
  cluster_.set_policy(policy);
  links_.send(0, encode(ApplyAnswer{epoch}));
}

ProcessGroup::RankState ProcessGroup::own_state() const {
  return {cluster_.quiescent(), transport_.sent_remote() + sent_, transport_.received_remote() + received_};
}

Status check_sampled(const Cluster& cluster, const Sampled& m) {
  const std::int32_t vocab = cluster.topology().vocab_size;
  if (vocab > 0 && m.token >= vocab)
    return Status::Error("token " + std::to_string(m.token) + " of request " + std::to_string(m.request) +
                         " is beyond the vocabulary (" + std::to_string(vocab) + ")");
  for (std::int32_t rank = 0; rank < cluster.topology().num_ranks(); ++rank)
    if (cluster.remote_rank(rank) && cluster.kv(rank).holds(m.request)) return Status::Ok();
  return Status::Error("request " + std::to_string(m.request) + " is open on no attention rank of another process");
}

void ProcessGroup::send_counted(std::int32_t rank, const std::string& m) {
  ++sent_;
  links_.send(rank, m);
}

void ProcessGroup::open_sequence(std::int32_t process, std::int32_t rank, const SequenceContext& context,
                                 const structured::GuideSpec* guide) {
  if (guide != nullptr) {
    // The vocabulary once per process (every request of a model shares one), ahead of the
    // request that needs it: messages between two processes arrive in order.
    if (vocabulary_sent_.size() <= static_cast<std::size_t>(process))
      vocabulary_sent_.resize(static_cast<std::size_t>(process) + 1, nullptr);
    if (vocabulary_sent_[static_cast<std::size_t>(process)] != guide->vocabulary.get()) {
      send_counted(process, encode(GuideVocabulary::of(*guide->vocabulary)));
      vocabulary_sent_[static_cast<std::size_t>(process)] = guide->vocabulary.get();
    }
  }
  send_counted(process, encode(SequenceOpen{rank, context.request,
                                            std::vector<std::int32_t>(context.block_table, context.block_table + context.pages),
                                            context.sampling,
                                            std::vector<std::int32_t>(context.prompt.begin(), context.prompt.end()),
                                            std::vector<kernels::TokenBias>(context.logit_bias.begin(), context.logit_bias.end()),
                                            context.prompt_length, guide != nullptr ? guide->grammar : nullptr}));
}

void ProcessGroup::close_sequence(std::int32_t process, std::int32_t rank, std::int64_t request) {
  send_counted(process, encode(SequenceClose{rank, request}));
}

void ProcessGroup::serve_attention() {
  const std::int32_t me = links_.rank();
  // Rank 0's KV block managers allocate; the managers of this rank's attention devices mirror
  // the block tables they handed out. Checked on the loop, which owns the topology.
  const auto attention_rank_here = [this](std::int32_t rank) {
    return rank >= 0 && rank < cluster_.topology().num_ranks() && !cluster_.remote_rank(rank);
  };
  links_.on(MessageType::SequenceOpen, [this, me, attention_rank_here](ByteReader& r) {
    SequenceOpen m;
    if (const Status s = decode(r, m); !s.ok()) return complain(me, "sequence open", s);
    loop_.post_external([this, me, attention_rank_here, m = std::move(m)]() mutable {
      ++received_;
      if (!attention_rank_here(m.rank))
        return complain(me, "sequence open", Status::Error("attention rank " + std::to_string(m.rank) + " is not here"));
      KvBlockManager& kv = cluster_.kv(m.rank);
      for (std::int32_t p : m.pages)
        if (p >= kv.num_pages())
          return complain(me, "sequence open",
                          Status::Error("page " + std::to_string(p) + " of " + std::to_string(kv.num_pages())));
      std::shared_ptr<const structured::GuideSpec> guide;
      if (m.grammar) {
        if (!guide_specs_)
          return complain(me, "sequence open",
                          Status::Error("guided request " + std::to_string(m.request) + " before any vocabulary"));
        guide = guide_specs_->get(m.grammar);
      }
      if (kv.holds(m.request)) kv.release(m.request);  // not expected: rank 0 closes before it reuses an index
      kv.adopt(m.request, std::move(m.pages), m.sampling, m.prompt, m.logit_bias, m.prompt_length, guide);
    });
  });
  links_.on(MessageType::GuideVocabulary, [this, me](ByteReader& r) {
    GuideVocabulary m;
    if (const Status s = decode(r, m); !s.ok()) return complain(me, "guided vocabulary", s);
    // Sorted here, off the loop; the loop takes it before the requests that need it (in order).
    auto built = m.build();
    loop_.post_external([this, built = std::move(built)]() mutable {
      ++received_;
      guide_specs_ = std::make_unique<structured::GuideSpecs>(std::move(built));
    });
  });
  links_.on(MessageType::SequenceClose, [this, me, attention_rank_here](ByteReader& r) {
    SequenceClose m;
    if (const Status s = decode(r, m); !s.ok()) return complain(me, "sequence close", s);
    loop_.post_external([this, me, attention_rank_here, m] {
      ++received_;
      if (!attention_rank_here(m.rank))
        return complain(me, "sequence close", Status::Error("attention rank " + std::to_string(m.rank) + " is not here"));
      cluster_.kv(m.rank).release(m.request);
    });
  });
  Worker::Hooks hooks;
  hooks.on_sampled = [this](std::int64_t request, std::int32_t token, const kernels::TokenLogprobs* logprobs) {
    send_counted(0, encode(Sampled{request, token, logprobs ? std::optional(*logprobs) : std::nullopt}));
  };
  hooks.on_group_sampled = [this](std::int32_t rank, std::int32_t group) {
    send_counted(0, encode(GroupSampled{rank, group}));
  };
  hooks.on_prompt_logprobs = [this](const PromptLogprobs& logprobs) { send_counted(0, encode(PromptScores{logprobs})); };
  cluster_.set_hooks(std::move(hooks));
}

void ProcessGroup::shutdown() {
  broadcast(std::string(1, static_cast<char>(MessageType::Shutdown)));  // no body
  end_outside_work();
}

void ProcessGroup::stop() { end_outside_work(); }

}  // namespace sy::dist
