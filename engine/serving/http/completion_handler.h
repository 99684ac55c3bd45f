// Answers one POST /v1/completions or /v1/chat/completions on an HTTP worker thread: parses
// and checks the body, submits the n choices of each of its prompts through the broker (a
// request each), and answers as one JSON body or as server-sent events. A client that goes away (noticed at the next write: a token, or a
// keep-alive every 250 ms) has its request cancelled and its KV pages freed.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

#include "engine/serving/http/completion_request.h"
#include "engine/serving/http/request_broker.h"
#include "engine/serving/http/text_support.h"
#include "engine/structured/guide_specs.h"
#include "engine/structured/token_vocabulary.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace sy::http {

struct PendingAnswer;  // an accepted answer's choices and what they have produced (completion_handler.cpp)

class CompletionHandler {
 public:
  // `text` must outlive the handler. An answer's id is `id_prefix` and its first request's id
  // ("chat" before it for chat answers).
  CompletionHandler(RequestBroker& broker, ModelLimits limits, const TextSupport& text, std::uint64_t seed_base,
                    std::string id_prefix);
  void handle(const httplib::Request& req, httplib::Response& res, Endpoint endpoint);
  // Answers submitted and not yet sent to their end (or given up on): a graceful shutdown waits
  // for them, as the engine's requests may be done while their tokens are still being written,
  // or an answer's first choice done before the others are submitted (prefix caching).
  std::int64_t answering() const { return answering_.load(); }

 private:
  // Submits the answer's choices (n per prompt, with their seeds) and waits until the admission
  // queue has taken every one; a refusal is returned, with the other choices cancelled. With
  // prefix caching a prompt's choices after its first wait for that one's prefill, to share
  // its KV pages.
  std::optional<ApiError> submit_choices(const CompletionRequest& r, PendingAnswer& a,
                                         const std::shared_ptr<const structured::GuideSpec>& guide);
  // The answer's choices (n per prompt), accepted: one JSON body once every choice has ended, or
  // their chunks as they come (each with its index).
  void answer_whole(httplib::Response& res, std::shared_ptr<PendingAnswer> a);
  void answer_stream(httplib::Response& res, std::shared_ptr<PendingAnswer> a);
  // Cancels the requests of the answer's choices that have not ended (the client left, a choice failed).
  void cancel_open(PendingAnswer& a);
  // The answer's prompts, each as token ids (as given, or the text or chat messages encoded)
  // with its completion budget and echo text; an error names the prompt at fault.
  std::optional<ApiError> encode_prompts(const CompletionRequest& r, PendingAnswer& a) const;

  RequestBroker& broker_;
  const ModelLimits limits_;
  const TextSupport& text_;
  const std::uint64_t seed_base_;
  const std::string id_prefix_;
  // Guided decoding's vocabulary, read from the tokenizer once (null: no tokenizer or no eos
  // token, and guided requests are refused), or why there is none.
  // Null when the server cannot guide (no_guide_vocabulary_ says why); else the specs of recent
  // grammars over the model's vocabulary, so that requests of one schema share its masks.
  std::unique_ptr<structured::GuideSpecs> guide_specs_;
  std::string no_guide_vocabulary_;
  std::atomic<std::uint64_t> answers_{0};
  std::atomic<std::int64_t> answering_{0};
};

// Writes `error` as the response (status and OpenAI's error body).
void set_error(httplib::Response& res, const ApiError& error);

}  // namespace sy::http
