#include "engine/serving/http/completion_handler.h"

#include <algorithm>
#include <chrono>
#include <span>

#include <httplib.h>

#include "engine/serving/http/answer_text.h"
#include "engine/serving/http/forced_tool_calls.h"
#include "engine/serving/http/logprobs_json.h"
#include "engine/serving/http/openai_shapes.h"
#include "engine/structured/model_vocabulary.h"

namespace sy::http {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kKeepAlive{250};

std::int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A content provider whose exceptions (none expected) end the answer instead of the process:
// cpp-httplib calls providers outside its handler's try.
template <class Fn>
httplib::ContentProviderWithoutLength guarded_provider(Fn fn) {
  return [fn = std::move(fn)](std::size_t, httplib::DataSink& sink) {
    try {
      return fn(sink);
    } catch (...) {
      return false;
    }
  };
}

}  // namespace

// One prompt of an answer, ready for the engine: its choices continue it.
struct PendingPrompt {
  std::vector<std::int32_t> ids;
  std::int32_t max_tokens = 0;  // the request's, or the default for this prompt's length
  std::string echo_text;        // with echo: the text its choices begin with
};

// One choice of an answer: its request's channel and what its text and tokens are so far.
struct PendingChoice {
  PendingChoice(const text::Tokenizer* tokenizer, const CompletionRequest& r, std::size_t prompt_index)
      : prompt(prompt_index), text(tokenizer, r.stop), logprobs_json(tokenizer, r.endpoint, r.logprobs) {
    if (r.tool_calls_read == CompletionRequest::ToolCallRead::Hermes) tool_stream.emplace();
  }
  std::size_t prompt;  // the index of the prompt it continues
  std::shared_ptr<RequestChannel> channel;
  AnswerText text;
  // Chat with tool calls parsed (tool_choice "auto"): streams send content through it.
  std::optional<HermesToolStream> tool_stream;
  // Chat with a named or required tool choice (PendingAnswer::holds_text): the text, held until the end.
  std::string held;
  // Per choice: completions' text_offset counts this choice's own text from 0.
  LogprobsJson logprobs_json;
  std::vector<kernels::TokenLogprobs> logprobs;  // whole answers: one per id, when asked (and the backend has logits)
  std::vector<kernels::TokenLogprobs> prompt_logprobs;  // positions 1, 2, …, when the request scores its prompt
  bool echoed = false;  // streams: the prompt went out (with the choice's first chunk)
  std::string whole;  // the text so far (whole answers)
  std::vector<std::int32_t> ids;
  FinishReason reason = FinishReason::None;  // set once the choice has ended (its last chunk written)
  std::int32_t cached_tokens = 0;  // prompt tokens a prefix cache supplied
  bool role_sent = false;
  bool done() const { return reason != FinishReason::None; }
};

// What a streamed or whole answer keeps between the provider's calls: its prompts and their
// choices (n each, prompt by prompt: choice p × n + i is prompt p's i-th, its index in the
// answer, as vLLM numbers them), read through one signal that every choice's channel notifies.
struct PendingAnswer {
  explicit PendingAnswer(const CompletionRequest& r)
      : want_logprobs(r.logprobs >= 0), echo(r.echo), echo_only(r.echo && r.max_tokens == 0),
        prompt_logprobs(r.prompt_logprobs), tool_calls_read(r.tool_calls_read), tool_choice_name(r.tool_choice_name) {}
  bool want_logprobs;
  // echo: every choice's text begins with its prompt's echo_text and its logprobs with that
  // prompt's tokens. echo_only (max_tokens 0): the engine draws one token to end the request,
  // and the answer drops it: the prompt alone, as vLLM answers.
  bool echo;
  bool echo_only;
  std::int32_t prompt_logprobs;  // vLLM's prompt_logprobs: alternatives per token, -1: not asked
  CompletionRequest::ToolCallRead tool_calls_read;  // how chat answers' tool calls are read
  std::string tool_choice_name;                     // a named tool choice's function
  // A choice's whole text read for tool calls as the request says (no calls: all content).
  ToolCallParse read_calls(const std::string& text) const {
    switch (tool_calls_read) {
      case CompletionRequest::ToolCallRead::Hermes: return parse_hermes_tool_calls(text);
      case CompletionRequest::ToolCallRead::Named: return named_tool_call(tool_choice_name, text);
      case CompletionRequest::ToolCallRead::Required: return required_tool_calls(text);
      case CompletionRequest::ToolCallRead::None: break;
    }
    return {text, {}};
  }
  // finish_reason "tool_calls" where calls were made: after "auto" only; a named or required
  // choice keeps the generation's reason, as vLLM answers.
  bool calls_finish() const { return tool_calls_read == CompletionRequest::ToolCallRead::Hermes; }
  // A named or required tool choice: the whole text is the calls, so streams hold it to the end.
  bool holds_text() const {
    return tool_calls_read == CompletionRequest::ToolCallRead::Named ||
           tool_calls_read == CompletionRequest::ToolCallRead::Required;
  }
  std::vector<PendingPrompt> prompts;
  // The logprobs object of choice `c` over these of its tokens (with echo, the prompt's first if
  // it has not gone out yet: the whole answer, or a stream's first chunk); null when not asked.
  nlohmann::json logprobs_json(PendingChoice& c, std::span<const kernels::TokenLogprobs> tokens) const {
    if (!want_logprobs) return nullptr;
    if (echo && !c.echoed) return c.logprobs_json.make_echo(prompts[c.prompt].ids.front(), c.prompt_logprobs, tokens);
    return c.logprobs_json.make(tokens);
  }
  // The text to send before the choice's next piece: the prompt's, once, with echo.
  std::string echo_prefix(PendingChoice& c) const {
    if (!echo || c.echoed) return {};
    c.echoed = true;
    return prompts[c.prompt].echo_text;
  }
  std::shared_ptr<ChannelSignal> signal = std::make_shared<ChannelSignal>();
  std::uint64_t seen = 0;  // the signal's generation when the channels were last read
  std::vector<PendingChoice> choices;
  AnswerHeader header;
  Usage usage;
  bool include_usage = false;
  bool prefix_caching = false;  // usage says how many prompt tokens came from the cache
  bool complete = false;  // every choice ended and written: nothing to cancel
  Clock::time_point last_write = Clock::now();

  bool all_done() const {
    for (const PendingChoice& c : choices)
      if (!c.done()) return false;
    return true;
  }
  // Waits for news up to kKeepAlive (unless `wait` is false), then hands each open choice's to
  // `each`, until it returns false.
  template <class Fn>
  void take_news(bool wait, Fn&& each) {
    if (wait) signal->wait(seen, kKeepAlive);
    seen = signal->generation();  // before reading: news after this wakes the next wait
    for (PendingChoice& c : choices) {
      if (c.done()) continue;
      RequestChannel::News news = c.channel->take(std::chrono::milliseconds(0));
      c.cached_tokens = news.cached_tokens;
      c.prompt_logprobs.insert(c.prompt_logprobs.end(), news.prompt_logprobs.begin(), news.prompt_logprobs.end());
      // max_tokens 0: the token that ended the request is not the answer's.
      if (echo_only) {
        news.tokens.clear();
        news.logprobs.clear();
      }
      if (!each(c, news)) break;
    }
  }
  // Usage once every choice has ended: each prompt counted once, every choice's tokens, as vLLM
  // sums them; with prefix caching, what every choice found cached, so that the pages a
  // prompt's later choices share with its first show (it may exceed prompt_tokens).
  void settle_usage() {
    usage.prompt_tokens = 0;
    usage.completion_tokens = 0;
    std::int32_t cached = 0;
    for (const PendingPrompt& p : prompts) usage.prompt_tokens += static_cast<std::int32_t>(p.ids.size());
    for (const PendingChoice& c : choices) {
      usage.completion_tokens += static_cast<std::int32_t>(c.ids.size());
      cached += c.cached_tokens;
    }
    if (prefix_caching) usage.cached_tokens = cached;
  }
};

void set_error(httplib::Response& res, const ApiError& error) {
  res.status = error.status;
  res.set_content(json_text(error.body()), "application/json");
}

CompletionHandler::CompletionHandler(RequestBroker& broker, ModelLimits limits, const TextSupport& text,
                                     std::uint64_t seed_base, std::string id_prefix)
    : broker_(broker), limits_(std::move(limits)), text_(text), seed_base_(seed_base), id_prefix_(std::move(id_prefix)) {
  // The end tokens of a guided answer: the tokenizer's eos and the one requests stop at.
  std::vector<std::int32_t> end;
  if (text_.eos_token_id()) end.push_back(*text_.eos_token_id());
  if (limits_.eos_token_id && (end.empty() || end[0] != *limits_.eos_token_id)) end.push_back(*limits_.eos_token_id);
  if (!limits_.no_guided_reason.empty()) {
    no_guide_vocabulary_ = limits_.no_guided_reason;
  } else if (!text_.tokenizer()) {
    no_guide_vocabulary_ = "it needs the model's tokenizer (the model directory has no tokenizer.json)";
  } else if (end.empty()) {
    no_guide_vocabulary_ = "it needs an eos token to end the answer, and neither the tokenizer nor config.json names one";
  } else {
    guide_specs_ = std::make_unique<structured::GuideSpecs>(
        structured::vocabulary_from_tokenizer(*text_.tokenizer(), std::move(end)));
  }
}

std::optional<ApiError> CompletionHandler::encode_prompts(const CompletionRequest& r, PendingAnswer& a) const {
  const bool chat = r.endpoint == Endpoint::ChatCompletions;
  const std::size_t count = chat ? 1 : r.prompts.size();
  std::int64_t admitted_tokens = 0;  // what the answer's choices put in the admission queue together
  for (std::size_t index = 0; index < count; ++index) {
    const std::string param = r.prompt_param(index);
    const PromptInput* in = chat ? nullptr : &r.prompts[index];
    TextSupport::Ids ids = chat       ? text_.encode_chat(r.messages, r.tools, r.add_generation_prompt,
                                                          /*add_special_tokens=*/false, r.continue_final_message)
                           : in->text ? text_.encode_prompt(*in->text)
                                      : TextSupport::Ids(in->ids);
    if (ApiError* e = std::get_if<ApiError>(&ids)) {
      // The tokenizer's errors say "prompt": in a list, say which.
      if (r.prompt_list) {
        e->param = param;
        e->message = param + ": " + e->message;
      }
      return *e;
    }
    std::vector<std::int32_t>& prompt = std::get<std::vector<std::int32_t>>(ids);
    if (prompt.empty()) return ApiError::bad_field(param, "'" + param + "' encodes to no tokens");
    // Ids the tokenizer made (a request's own were checked as it was parsed): a tokenizer.json
    // with tokens beyond config.json's vocab_size would index past the embedding table.
    if (chat || in->text)
      for (const std::int32_t id : prompt)
        if (id < 0 || id >= limits_.vocab_size)
          return ApiError::bad_field(param, "'" + param + "' encodes to token " + std::to_string(id) + " ('" +
                                                text_.tokenizer()->id_to_token(id).value_or("?") +
                                                "'), which the model does not have (its vocab_size is " +
                                                std::to_string(limits_.vocab_size) +
                                                "): the tokenizer and config.json disagree");
    auto budget = completion_budget(r, index, static_cast<std::int32_t>(prompt.size()), limits_);
    if (ApiError* e = std::get_if<ApiError>(&budget)) return *e;
    if (static_cast<std::int64_t>(prompt.size()) > broker_.max_prompt_tokens())
      return ApiError::bad_field(param, "'" + param + "' has " + std::to_string(prompt.size()) +
                                            " tokens, more than the server admits in one prompt (--max-waiting-tokens " +
                                            std::to_string(broker_.max_prompt_tokens()) + ")");
    admitted_tokens += static_cast<std::int64_t>(prompt.size()) * r.n;
    PendingPrompt p;
    p.max_tokens = std::get<std::int32_t>(budget);
    if (r.echo && in) {  // completions only
      // A text prompt echoes as the client wrote it (vLLM's); token ids as their text, special
      // tokens skipped as in every answer's text (none without a tokenizer).
      if (in->text) {
        p.echo_text = *in->text;
      } else if (text_.tokenizer()) {
        p.echo_text = text_.tokenizer()->decode(prompt, /*skip_special_tokens=*/true);
      }
    }
    p.ids = std::move(prompt);
    a.prompts.push_back(std::move(p));
  }
  // The choices enter the admission queue together: more than it holds at once would be a 429
  // on every try, so it is a request error (as one prompt beyond --max-waiting-tokens is).
  const std::int64_t choices = static_cast<std::int64_t>(count) * r.n;
  const std::string what = r.prompt_list ? "prompt" : "n";
  if (choices > broker_.max_waiting_requests())
    return ApiError::bad_field(what, "the request asks for " + std::to_string(choices) +
                                         " choices (prompts × n), more than the server admits at once "
                                         "(--max-waiting-requests " +
                                         std::to_string(broker_.max_waiting_requests()) + ")");
  if (choices > 1 && admitted_tokens > broker_.max_prompt_tokens())
    return ApiError::bad_field(what, "the request's choices hold " + std::to_string(admitted_tokens) +
                                         " prompt tokens together (each prompt once per choice), more than the "
                                         "server admits at once (--max-waiting-tokens " +
                                         std::to_string(broker_.max_prompt_tokens()) + ")");
  return std::nullopt;
}

std::optional<ApiError> CompletionHandler::submit_choices(const CompletionRequest& r, PendingAnswer& a,
                                                        const std::shared_ptr<const structured::GuideSpec>& guide) {
  const std::uint64_t answer = answers_.fetch_add(1);
  // Without a seed each request draws its own; with one, the same request gives the same answer.
  // Choice i of every prompt samples with seed + i (vLLM's: each prompt is a request of n
  // choices): it is what that prompt alone with n = 1 and seed + i answers. A drawn seed gives
  // every choice of every prompt its own: drawn + p × n + i.
  const std::uint64_t drawn = seed_base_ ^ (answer * 0x9E3779B97F4A7C15ull);
  const auto n = static_cast<std::size_t>(r.n);
  for (std::size_t p = 0; p < a.prompts.size(); ++p)
    for (std::size_t i = 0; i < n; ++i) a.choices.emplace_back(text_.tokenizer(), r, p);
  // follows_accepted: the choice follows its prompt's first, and so belongs to an answer already
  // accepted; a graceful shutdown begun meanwhile lets it in, as it lets the first one finish.
  const auto submit = [&](std::size_t k, bool follows_accepted) {
    const std::size_t p = k / n, i = k % n;
    const PendingPrompt& prompt = a.prompts[p];
    const std::uint64_t seed = r.seed ? *r.seed + i : drawn + p * n + i;
    RequestSpec spec;
    spec.prompt = prompt.ids;
    // max_tokens 0 (echo): one token ends the request, and the answer drops it (vLLM's way).
    spec.max_new_tokens = std::max(prompt.max_tokens, 1);
    spec.sampling = SamplingSpec{r.temperature,      r.top_p,             r.top_k,
                                 seed,               r.logprobs,          r.min_p,
                                 r.presence_penalty, r.frequency_penalty, r.repetition_penalty,
                                 r.engine_prompt_logprobs()};
    spec.logit_bias = r.logit_bias;
    spec.guide = guide;
    spec.stop_token_ids = r.stop_token_ids;
    if (limits_.eos_token_id && !r.ignore_eos) spec.stop_token_ids.push_back(*limits_.eos_token_id);
    a.choices[k].channel = broker_.submit(std::move(spec), a.signal, follows_accepted);
  };
  // Waits for the admission queue's word on choices [from, to) of every prompt; one refused
  // choice refuses the answer, and every choice submitted is let go.
  const auto accepted = [&](std::size_t from, std::size_t to) -> std::optional<ApiError> {
    for (std::size_t p = 0; p < a.prompts.size(); ++p)
      for (std::size_t k = p * n + from; k < p * n + to; ++k) {
        if (!a.choices[k].channel) continue;
        const RequestChannel::News verdict = a.choices[k].channel->wait_accepted();
        if (!verdict.error) continue;
        for (PendingChoice& other : a.choices)
          if (other.channel && &other != &a.choices[k]) broker_.cancel(other.channel->id());
        return verdict.error;
      }
    return std::nullopt;
  };

  // With prefix caching a prompt's choices 1..n-1 follow its choice 0 once that one's prompt is
  // prefilled, and share its KV pages instead of each prefilling the whole prompt. Not when
  // nothing could be shared: a prompt of one page or less (the page of its last token is always
  // computed), or prompts scored (prompt_logprobs, echo with logprobs: such a request computes
  // every position and takes nothing from the cache); there the wait would only delay them.
  std::vector<std::size_t> held;  // prompts whose choices 1..n-1 wait for their choice 0
  if (n > 1 && broker_.prefix_caching() && r.engine_prompt_logprobs() < 0)
    for (std::size_t p = 0; p < a.prompts.size(); ++p)
      if (a.prompts[p].ids.size() > static_cast<std::size_t>(broker_.kv_page_size())) held.push_back(p);
  for (std::size_t k = 0; k < a.choices.size(); ++k)
    if (k % n == 0 || !std::binary_search(held.begin(), held.end(), k / n)) submit(k, false);
  if (auto e = accepted(0, n)) return e;
  if (held.empty()) return std::nullopt;

  // Every choice 0 ends (a token, a finish, a failure of the deployment or of the server
  // closing), so this wait does too; the answer starts once every choice is accepted, so that a
  // refusal of one is still the whole request's status, as without the wait. A client that
  // goes away meanwhile is noticed once the answer starts writing.
  while (!held.empty()) {
    const std::uint64_t seen = a.signal->generation();  // before looking: news after it wakes the wait
    std::erase_if(held, [&](std::size_t p) {
      RequestChannel& first = *a.choices[p * n].channel;
      if (!first.prefilled_or_ended()) return false;
      // A choice 0 that failed fails the answer when it is read; its siblings go on meanwhile
      // as they would have without the wait.
      for (std::size_t k = p * n + 1; k < (p + 1) * n; ++k) submit(k, true);
      return true;
    });
    if (!held.empty()) a.signal->wait(seen, kKeepAlive);
  }
  return accepted(1, n);
}

void CompletionHandler::handle(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
  ParsedRequest parsed = parse_completion_request(req.body, endpoint, limits_);
  if (const ApiError* e = std::get_if<ApiError>(&parsed)) return set_error(res, *e);
  CompletionRequest& r = std::get<CompletionRequest>(parsed);
  if (!r.stop.empty() && !text_.tokenizer())
    return set_error(res, ApiError::bad_field("stop", "stop strings need the model's tokenizer (this model has no "
                                                      "tokenizer.json): use stop_token_ids"));
  std::shared_ptr<const structured::GuideSpec> guide;
  if (r.grammar) {
    if (!guide_specs_)
      return set_error(res, ApiError::bad_field(r.guided_param, "'" + r.guided_param +
                                                                    "' asks for guided decoding (structured output), "
                                                                    "which this server does not do: " +
                                                                    no_guide_vocabulary_));
    guide = guide_specs_->get(r.grammar);
  }
  auto a = std::make_shared<PendingAnswer>(r);
  if (auto e = encode_prompts(r, *a)) return set_error(res, *e);

  // Counted from the first submission, not from the response: with prefix caching an answer's
  // later choices are submitted after its first has run, maybe ended, and a graceful shutdown
  // must not find the server idle meanwhile. The response's releaser (httplib runs it when the
  // response goes) ends the count.
  answering_.fetch_add(1);
  if (auto e = submit_choices(r, *a, guide)) {
    answering_.fetch_sub(1);
    return set_error(res, *e);
  }
  a->header = {id_prefix_ + std::to_string(a->choices[0].channel->id()), unix_seconds(), limits_.name, r.endpoint};
  if (r.endpoint == Endpoint::ChatCompletions) a->header.id = "chat" + a->header.id;
  a->include_usage = r.include_usage;
  a->prefix_caching = broker_.prefix_caching();
  if (r.stream) {
    answer_stream(res, std::move(a));
  } else {
    answer_whole(res, std::move(a));
  }
}

void CompletionHandler::cancel_open(PendingAnswer& a) {
  for (PendingChoice& c : a.choices)
    if (!c.done()) broker_.cancel(c.channel->id());
}

void CompletionHandler::answer_whole(httplib::Response& res, std::shared_ptr<PendingAnswer> a) {
  // Chunked, so that while the answer is made a space (JSON allows it before the value) can
  // go out now and then: the write fails once the client has gone, and the requests are cancelled.
  res.set_chunked_content_provider(
      "application/json",
      guarded_provider([this, a](httplib::DataSink& sink) {
        std::optional<ApiError> error;
        a->take_news(true, [&](PendingChoice& c, RequestChannel::News& news) {
          for (std::size_t i = 0; i < news.tokens.size(); ++i) {
            c.ids.push_back(news.tokens[i]);
            if (i < news.logprobs.size()) c.logprobs.push_back(std::move(news.logprobs[i]));
            c.whole += c.text.push(news.tokens[i]);
            if (c.text.stopped()) break;
          }
          if (news.error) {
            error = news.error;
            return false;
          }
          if (c.text.stopped() || news.finished != FinishReason::None) {
            if (!c.text.stopped()) c.whole += c.text.finish();
            // A stop string ends the choice before the engine does: free its request now.
            if (news.finished == FinishReason::None) broker_.cancel(c.channel->id());
            c.reason = c.text.stopped() ? FinishReason::Stop : news.finished;
          }
          return true;
        });
        std::string out;
        if (error) {
          cancel_open(*a);
          out = json_text(error->body());
        } else if (a->all_done()) {
          a->settle_usage();
          std::vector<ChoiceJson> choices;
          for (PendingChoice& c : a->choices) {
            ChoiceJson choice{"", c.ids, c.reason, a->logprobs_json(c, c.logprobs), std::nullopt, {}, false};
            choice.text = a->echo_prefix(c) + c.whole;
            if (a->tool_calls_read != CompletionRequest::ToolCallRead::None) {
              ToolCallParse parse = a->read_calls(choice.text);
              choice.tool_calls_finish = a->calls_finish();
              if (!parse.calls.empty()) {
                choice.tool_calls = std::move(parse.calls);
                choice.content_null = !parse.content;
                choice.text = parse.content.value_or("");
              }
            }
            if (a->prompt_logprobs >= 0)
              choice.prompt_logprobs = c.logprobs_json.prompt_logprobs(c.prompt_logprobs, a->prompt_logprobs);
            choices.push_back(std::move(choice));
          }
          out = json_text(completion_json(a->header, choices, a->usage));
        } else if (Clock::now() - a->last_write >= kKeepAlive) {
          a->last_write = Clock::now();
          return sink.write(" ", 1);
        } else {
          return true;
        }
        a->complete = true;
        out += "\n";
        if (!sink.write(out.data(), out.size())) return false;
        sink.done();
        return true;
      }),
      [this, a](bool) {
        if (!a->complete) cancel_open(*a);
        answering_.fetch_sub(1);
      });
}

void CompletionHandler::answer_stream(httplib::Response& res, std::shared_ptr<PendingAnswer> a) {
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      guarded_provider([this, a](httplib::DataSink& sink) {
        std::string out;
        const auto index = [&](const PendingChoice& c) { return static_cast<std::int32_t>(&c - a->choices.data()); };
        for (PendingChoice& c : a->choices) {
          if (!c.role_sent && a->header.endpoint == Endpoint::ChatCompletions) {
            out += sse_event(role_chunk_json(a->header, index(c)));
            c.role_sent = true;
          }
        }
        std::optional<ApiError> error;
        a->take_news(out.empty(), [&](PendingChoice& c, RequestChannel::News& news) {
          const bool finished = news.finished != FinishReason::None;
          // One event per token, as OpenAI streams; the choice's last carries its finish reason.
          // Text held back (a character not complete yet, a possible stop string) goes out with a
          // later one.
          std::string last_text;
          std::vector<std::int32_t> last_ids;
          nlohmann::json last_logprobs;
          // The token's logprobs object (with echo, the choice's first also holds the prompt's),
          // null when not asked for (or the backend has no logits).
          const auto logprobs_of = [&](std::size_t i) -> nlohmann::json {
            const std::span<const kernels::TokenLogprobs> one =
                i < news.logprobs.size() ? std::span<const kernels::TokenLogprobs>(&news.logprobs[i], 1)
                                         : std::span<const kernels::TokenLogprobs>();
            if (one.empty() && !(a->echo && !c.echoed)) return nullptr;
            return a->logprobs_json(c, one);
          };
          for (std::size_t i = 0; i < news.tokens.size(); ++i) {
            const std::int32_t t = news.tokens[i];
            c.ids.push_back(t);
            std::string piece = c.text.push(t);
            if (c.tool_stream) {
              piece = c.tool_stream->push(piece);
            } else if (a->holds_text()) {
              c.held += piece;
              piece.clear();
            }
            if (c.text.stopped() || (finished && i + 1 == news.tokens.size())) {
              last_logprobs = logprobs_of(i);  // before echo_prefix: it marks the prompt as sent
              last_text = a->echo_prefix(c) + piece;
              last_ids = {t};
              break;
            }
            nlohmann::json logprobs = logprobs_of(i);
            out += sse_event(chunk_json(a->header, index(c), a->echo_prefix(c) + piece, {t}, std::nullopt,
                                        std::nullopt, std::move(logprobs)));
          }
          if (news.error) {
            error = news.error;
            return false;
          }
          if (c.text.stopped() || finished) {
            if (!c.text.stopped()) {
              const std::string tail = c.text.finish();
              if (a->holds_text()) c.held += tail;
              else last_text += c.tool_stream ? c.tool_stream->push(tail) : tail;
            }
            // The calls come out once the choice has ended (HermesToolStream says why).
            std::vector<ToolCall> calls;
            if (c.tool_stream) {
              HermesToolStream::End end = c.tool_stream->finish();
              last_text += end.content;
              calls = std::move(end.calls);
            } else if (a->holds_text()) {
              ToolCallParse parse = a->read_calls(c.held);
              if (parse.calls.empty()) last_text += c.held;
              calls = std::move(parse.calls);
            }
            // Echo with no token of the answer's (max_tokens 0): the prompt is the one chunk.
            if (a->echo && !c.echoed) {
              last_logprobs = logprobs_of(news.tokens.size());
              last_text = a->echo_prefix(c) + last_text;
            }
            // A stop string ends the choice before the engine does: free its request now.
            if (!finished) broker_.cancel(c.channel->id());
            c.reason = c.text.stopped() ? FinishReason::Stop : news.finished;
            // Usage rides on the answer's last chunk (as llama-server sends it) unless the client
            // asked for OpenAI's separate usage chunk.
            std::optional<Usage> usage;
            if (a->all_done() && !a->include_usage) {
              a->settle_usage();
              usage = a->usage;
            }
            if (calls.empty()) {
              out += sse_event(chunk_json(a->header, index(c), last_text, last_ids, c.reason, usage, std::move(last_logprobs)));
              return true;
            }
            // The last token's chunk, each call's two (name, then arguments, as vLLM streams them),
            // then the finish reason.
            if (!last_text.empty() || !last_ids.empty() || !last_logprobs.is_null())
              out += sse_event(chunk_json(a->header, index(c), last_text, last_ids, std::nullopt, std::nullopt,
                                          std::move(last_logprobs)));
            for (std::size_t k = 0; k < calls.size(); ++k) {
              out += sse_event(tool_call_chunk_json(a->header, index(c), k, calls[k], /*arguments=*/false));
              out += sse_event(tool_call_chunk_json(a->header, index(c), k, calls[k], /*arguments=*/true));
            }
            out += sse_event(chunk_json(a->header, index(c), "", {}, c.reason, usage, nullptr, a->calls_finish()));
          }
          return true;
        });
        if (error) {
          cancel_open(*a);
          out += sse_event(error->body());
          out += kSseDone;
          a->complete = true;
        } else if (a->all_done()) {
          a->settle_usage();
          if (a->include_usage) out += sse_event(usage_chunk_json(a->header, a->usage));
          out += kSseDone;
          a->complete = true;
        } else if (out.empty() && Clock::now() - a->last_write >= kKeepAlive) {
          out = kSseKeepAlive;
        }
        if (out.empty()) return true;
        a->last_write = Clock::now();
        if (!sink.write(out.data(), out.size())) return false;
        if (a->complete) sink.done();
        return true;
      }),
      [this, a](bool) {
        if (!a->complete) cancel_open(*a);
        answering_.fetch_sub(1);
      });
}

}  // namespace sy::http
