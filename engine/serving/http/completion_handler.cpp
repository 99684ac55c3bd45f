#include "engine/serving/http/completion_handler.h"

#include <chrono>

#include <httplib.h>

#include "engine/serving/http/answer_text.h"
#include "engine/serving/http/logprobs_json.h"
#include "engine/serving/http/openai_shapes.h"

namespace sy::http {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kKeepAlive{250};

std::int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// What a streamed or whole answer keeps between the provider's calls.
struct Answer {
  Answer(const text::Tokenizer* tokenizer, const CompletionRequest& r)
      : text(tokenizer, r.stop), want_logprobs(r.logprobs >= 0), logprobs_json(tokenizer, r.endpoint, r.logprobs) {}
  AnswerText text;
  bool want_logprobs;
  LogprobsJson logprobs_json;
  std::vector<kernels::TokenLogprobs> logprobs;  // whole answers: one per id, when asked (and the backend has logits)
  std::string whole;  // the text so far (whole answers)
  std::shared_ptr<RequestChannel> channel;
  AnswerHeader header;
  Usage usage;
  std::vector<std::int32_t> ids;
  bool role_sent = false;
  bool include_usage = false;
  bool complete = false;  // finished and written: nothing to cancel
  Clock::time_point last_write = Clock::now();
};

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

void set_error(httplib::Response& res, const ApiError& error) {
  res.status = error.status;
  res.set_content(json_text(error.body()), "application/json");
}

CompletionHandler::CompletionHandler(RequestBroker& broker, ModelLimits limits, const TextSupport& text,
                                     std::uint64_t seed_base)
    : broker_(broker), limits_(std::move(limits)), text_(text), seed_base_(seed_base) {}

std::variant<std::vector<std::int32_t>, ApiError> CompletionHandler::prompt_ids(CompletionRequest& r) const {
  TextSupport::Ids ids = r.endpoint == Endpoint::ChatCompletions ? text_.encode_chat(r.messages)
                         : r.prompt_text                          ? text_.encode_prompt(*r.prompt_text)
                                                                  : TextSupport::Ids(std::move(r.prompt_ids));
  if (const auto* e = std::get_if<ApiError>(&ids)) return *e;
  auto& prompt = std::get<std::vector<std::int32_t>>(ids);
  const char* param = r.endpoint == Endpoint::ChatCompletions ? "messages" : "prompt";
  if (prompt.empty()) return ApiError::bad_field(param, std::string("'") + param + "' encodes to no tokens");
  if (auto e = check_lengths(r, static_cast<std::int32_t>(prompt.size()), limits_)) return *e;
  return std::move(prompt);
}

void CompletionHandler::handle(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
  ParsedRequest parsed = parse_completion_request(req.body, endpoint, limits_);
  if (const ApiError* e = std::get_if<ApiError>(&parsed)) return set_error(res, *e);
  CompletionRequest& r = std::get<CompletionRequest>(parsed);
  if (!r.stop.empty() && !text_.tokenizer())
    return set_error(res, ApiError::bad_field("stop", "stop strings need the model's tokenizer (this model has no "
                                                      "tokenizer.json): use stop_token_ids"));
  auto ids = prompt_ids(r);
  if (const ApiError* e = std::get_if<ApiError>(&ids)) return set_error(res, *e);
  std::vector<std::int32_t>& prompt = std::get<std::vector<std::int32_t>>(ids);
  const auto prompt_tokens = static_cast<std::int32_t>(prompt.size());

  const std::uint64_t n = answers_.fetch_add(1);
  RequestSpec spec;
  spec.prompt = std::move(prompt);
  spec.max_new_tokens = *r.max_tokens;
  // Without a seed each request draws its own; with one, the same request gives the same answer.
  spec.sampling = SamplingSpec{r.temperature, r.top_p, r.top_k, r.seed ? *r.seed : seed_base_ ^ (n * 0x9E3779B97F4A7C15ull),
                               r.logprobs};
  spec.stop_token_ids = r.stop_token_ids;
  if (limits_.eos_token_id && !r.ignore_eos) spec.stop_token_ids.push_back(*limits_.eos_token_id);
  std::shared_ptr<RequestChannel> channel = broker_.submit(std::move(spec));
  const RequestChannel::News verdict = channel->wait_accepted();
  if (verdict.error) return set_error(res, *verdict.error);
  if (r.stream) {
    answer_stream(res, r, std::move(channel), prompt_tokens);
  } else {
    answer_whole(res, r, std::move(channel), prompt_tokens);
  }
}

void CompletionHandler::answer_whole(httplib::Response& res, const CompletionRequest& r,
                                     std::shared_ptr<RequestChannel> channel, std::int32_t prompt_tokens) {
  auto a = std::make_shared<Answer>(text_.tokenizer(), r);
  a->channel = std::move(channel);
  a->header = {"cmpl-" + std::to_string(a->channel->id()), unix_seconds(), limits_.name, r.endpoint};
  if (r.endpoint == Endpoint::ChatCompletions) a->header.id = "chat" + a->header.id;
  a->usage.prompt_tokens = prompt_tokens;
  // Chunked, so that while the answer is made a space (JSON allows it before the value) can
  // go out now and then: the write fails once the client has gone, and the request is cancelled.
  res.set_chunked_content_provider(
      "application/json",
      guarded_provider([this, a](httplib::DataSink& sink) {
        RequestChannel::News news = a->channel->take(kKeepAlive);
        for (std::size_t i = 0; i < news.tokens.size(); ++i) {
          a->ids.push_back(news.tokens[i]);
          if (i < news.logprobs.size()) a->logprobs.push_back(std::move(news.logprobs[i]));
          a->whole += a->text.push(news.tokens[i]);
          if (a->text.stopped()) break;
        }
        std::string out;
        if (news.error) {
          out = json_text(news.error->body());
        } else if (a->text.stopped() || news.finished != FinishReason::None) {
          if (!a->text.stopped()) a->whole += a->text.finish();
          const FinishReason reason = a->text.stopped() ? FinishReason::Stop : news.finished;
          // A stop string ends the answer before the engine does: free the request now.
          if (news.finished == FinishReason::None) broker_.cancel(a->channel->id());
          a->usage.completion_tokens = static_cast<std::int32_t>(a->ids.size());
          out = json_text(completion_json(a->header, a->whole, a->ids, reason, a->usage,
                                          a->want_logprobs ? a->logprobs_json.make(a->logprobs) : nullptr));
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
        if (!a->complete) broker_.cancel(a->channel->id());
      });
}

void CompletionHandler::answer_stream(httplib::Response& res, const CompletionRequest& r,
                                      std::shared_ptr<RequestChannel> channel, std::int32_t prompt_tokens) {
  auto a = std::make_shared<Answer>(text_.tokenizer(), r);
  a->channel = std::move(channel);
  a->header = {"cmpl-" + std::to_string(a->channel->id()), unix_seconds(), limits_.name, r.endpoint};
  if (r.endpoint == Endpoint::ChatCompletions) a->header.id = "chat" + a->header.id;
  a->usage.prompt_tokens = prompt_tokens;
  a->include_usage = r.include_usage;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      guarded_provider([this, a](httplib::DataSink& sink) {
        std::string out;
        if (!a->role_sent && a->header.endpoint == Endpoint::ChatCompletions) {
          out += sse_event(role_chunk_json(a->header));
          a->role_sent = true;
        }
        RequestChannel::News news = a->channel->take(kKeepAlive);
        bool finished = news.finished != FinishReason::None;
        // One event per token, as OpenAI streams; the last carries the finish reason. Text held
        // back (a character not complete yet, a possible stop string) goes out with a later one.
        std::string last_text;
        std::vector<std::int32_t> last_ids;
        nlohmann::json last_logprobs;
        // The token's logprobs object, null when not asked for (or the backend has no logits).
        const auto logprobs_of = [&](std::size_t i) -> nlohmann::json {
          if (!a->want_logprobs || i >= news.logprobs.size()) return nullptr;
          return a->logprobs_json.make(std::span<const kernels::TokenLogprobs>(&news.logprobs[i], 1));
        };
        for (std::size_t i = 0; i < news.tokens.size(); ++i) {
          const std::int32_t t = news.tokens[i];
          a->ids.push_back(t);
          std::string piece = a->text.push(t);
          if (a->text.stopped() || (finished && i + 1 == news.tokens.size())) {
            last_text = std::move(piece);
            last_ids = {t};
            last_logprobs = logprobs_of(i);
            break;
          }
          out += sse_event(chunk_json(a->header, piece, {t}, std::nullopt, std::nullopt, logprobs_of(i)));
        }
        if (news.error) {
          out += sse_event(news.error->body());
          out += kSseDone;
          a->complete = true;
        } else if (a->text.stopped() || finished) {
          if (!a->text.stopped()) last_text += a->text.finish();
          const FinishReason reason = a->text.stopped() ? FinishReason::Stop : news.finished;
          // A stop string ends the answer before the engine does: free the request now.
          if (!finished) broker_.cancel(a->channel->id());
          a->usage.completion_tokens = static_cast<std::int32_t>(a->ids.size());
          // Usage rides on the last chunk (as llama-server sends it) unless the client asked for
          // OpenAI's separate usage chunk.
          out += sse_event(chunk_json(a->header, last_text, last_ids, reason,
                                      a->include_usage ? std::nullopt : std::optional<Usage>(a->usage),
                                      std::move(last_logprobs)));
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
        if (!a->complete) broker_.cancel(a->channel->id());
      });
}

}  // namespace sy::http
