#include "engine/serving/http/completion_handler.h"

#include <chrono>

#include <httplib.h>

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

CompletionHandler::CompletionHandler(RequestBroker& broker, ModelLimits limits, std::uint64_t seed_base)
    : broker_(broker), limits_(std::move(limits)), seed_base_(seed_base) {}

void CompletionHandler::handle(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
  ParsedRequest parsed = parse_completion_request(req.body, endpoint, limits_);
  if (const ApiError* e = std::get_if<ApiError>(&parsed)) return set_error(res, *e);
  CompletionRequest& r = std::get<CompletionRequest>(parsed);
  // Text (string prompts, chat messages, stop strings) needs the model's tokenizer and chat
  // template; until the engine reads them, prompts are token ids.
  if (r.prompt_text || endpoint == Endpoint::ChatCompletions)
    return set_error(res, ApiError::bad_field(endpoint == Endpoint::ChatCompletions ? "messages" : "prompt",
                                              "text needs the model's tokenizer, which this server does not read yet: "
                                              "send the prompt as a list of token ids"));
  if (!r.stop.empty())
    return set_error(res, ApiError::bad_field("stop", "stop strings need the model's tokenizer, which this server does "
                                                      "not read yet: use stop_token_ids"));
  const auto prompt_tokens = static_cast<std::int32_t>(r.prompt_ids.size());

  const std::uint64_t n = answers_.fetch_add(1);
  RequestSpec spec;
  spec.prompt = std::move(r.prompt_ids);
  spec.max_new_tokens = *r.max_tokens;
  // Without a seed each request draws its own; with one, the same request gives the same answer.
  spec.sampling = SamplingSpec{r.temperature, r.top_p, r.top_k, r.seed ? *r.seed : seed_base_ ^ (n * 0x9E3779B97F4A7C15ull)};
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
  auto a = std::make_shared<Answer>();
  a->channel = std::move(channel);
  a->header = {"cmpl-" + std::to_string(a->channel->id()), unix_seconds(), limits_.name, r.endpoint};
  if (r.endpoint == Endpoint::ChatCompletions) a->header.id = "chat" + a->header.id;
  a->usage.prompt_tokens = prompt_tokens;
  // Chunked, so that while the answer is made a space (JSON allows it before the value) can
  // go out now and then: the write fails once the client has gone, and the request is cancelled.
  res.set_chunked_content_provider(
      "application/json",
      guarded_provider([a](httplib::DataSink& sink) {
        RequestChannel::News news = a->channel->take(kKeepAlive);
        a->ids.insert(a->ids.end(), news.tokens.begin(), news.tokens.end());
        std::string out;
        if (news.error) {
          out = json_text(news.error->body());
        } else if (news.finished != FinishReason::None) {
          a->usage.completion_tokens = static_cast<std::int32_t>(a->ids.size());
          out = json_text(completion_json(a->header, "", a->ids, news.finished, a->usage));
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
  auto a = std::make_shared<Answer>();
  a->channel = std::move(channel);
  a->header = {"cmpl-" + std::to_string(a->channel->id()), unix_seconds(), limits_.name, r.endpoint};
  if (r.endpoint == Endpoint::ChatCompletions) a->header.id = "chat" + a->header.id;
  a->usage.prompt_tokens = prompt_tokens;
  a->include_usage = r.include_usage;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      guarded_provider([a](httplib::DataSink& sink) {
        std::string out;
        if (!a->role_sent && a->header.endpoint == Endpoint::ChatCompletions) {
          out += sse_event(role_chunk_json(a->header));
          a->role_sent = true;
        }
        RequestChannel::News news = a->channel->take(kKeepAlive);
        const bool finished = news.finished != FinishReason::None;
        // One event per token, as OpenAI streams; the last carries the finish reason.
        for (std::size_t i = 0; i < news.tokens.size(); ++i) {
          a->ids.push_back(news.tokens[i]);
          if (finished && i + 1 == news.tokens.size()) break;
          out += sse_event(chunk_json(a->header, "", {news.tokens[i]}, std::nullopt, std::nullopt));
        }
        if (news.error) {
          out += sse_event(news.error->body());
          out += kSseDone;
          a->complete = true;
        } else if (finished) {
          a->usage.completion_tokens = static_cast<std::int32_t>(a->ids.size());
          std::vector<std::int32_t> last;
          if (!news.tokens.empty()) last.push_back(news.tokens.back());
          // Usage rides on the last chunk (as llama-server sends it) unless the client asked for
          // OpenAI's separate usage chunk.
          out += sse_event(chunk_json(a->header, "", last, news.finished,
                                      a->include_usage ? std::nullopt : std::optional<Usage>(a->usage)));
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
