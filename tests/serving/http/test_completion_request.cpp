// Request bodies: every wrong type, range or unsupported feature is a 400 naming the field;
// defaults follow OpenAI's and vLLM's.
#include <gtest/gtest.h>

#include "engine/serving/http/completion_request.h"

#include <nlohmann/json.hpp>

#include "engine/structured/schema_compiler.h"

namespace sy::http {
namespace {

const ModelLimits kLimits{"m", 64, 100, 2};

ApiError error_of(const std::string& body, Endpoint e = Endpoint::Completions) {
  ParsedRequest p = parse_completion_request(body, e, kLimits);
  EXPECT_TRUE(std::holds_alternative<ApiError>(p)) << body;
  return std::holds_alternative<ApiError>(p) ? std::get<ApiError>(p) : ApiError{};
}

CompletionRequest parsed(const std::string& body, Endpoint e = Endpoint::Completions) {
  ParsedRequest p = parse_completion_request(body, e, kLimits);
  EXPECT_TRUE(std::holds_alternative<CompletionRequest>(p))
      << body << ": " << (std::holds_alternative<ApiError>(p) ? std::get<ApiError>(p).message : "");
  return std::holds_alternative<CompletionRequest>(p) ? std::get<CompletionRequest>(p) : CompletionRequest{};
}

TEST(CompletionRequest, DefaultsAndValues) {
  CompletionRequest r = parsed(R"({"model":"m","prompt":[1,2,3]})");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].ids, (std::vector<std::int32_t>{1, 2, 3}));
  EXPECT_FALSE(r.prompt_list);
  EXPECT_FALSE(r.max_tokens);
  EXPECT_EQ(std::get<std::int32_t>(completion_budget(r, 0, 3, kLimits)), 16);  // OpenAI's completions default
  EXPECT_EQ(std::get<std::int32_t>(completion_budget(r, 0, 60, kLimits)), 4) << "what the context leaves";
  EXPECT_FLOAT_EQ(r.temperature, 1.0f);
  EXPECT_FALSE(r.seed);
  r = parsed(R"({"prompt":[[4,5]],"max_tokens":7,"temperature":0,"top_p":0.5,"seed":-3,"stop":"x",
                 "stop_token_ids":[9],"stream":true,"stream_options":{"include_usage":true},"user":"u","n":1})");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].ids, (std::vector<std::int32_t>{4, 5}));
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.top_p, 0.5f);
  EXPECT_EQ(r.seed, static_cast<std::uint64_t>(-3));
  EXPECT_EQ(r.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(r.stop_token_ids, std::vector<std::int32_t>{9});
  EXPECT_TRUE(r.stream && r.include_usage);
  EXPECT_EQ(r.n, 1);
  EXPECT_EQ(parsed(R"({"prompt":[1],"n":16,"best_of":16})").n, 16);
  r = parsed(R"({"prompt":[1],"min_p":0.05,"presence_penalty":-0.5,"frequency_penalty":1.25})");
  EXPECT_EQ(r.min_p, 0.05f);
  EXPECT_EQ(r.presence_penalty, -0.5f);
  EXPECT_EQ(r.frequency_penalty, 1.25f);
  EXPECT_EQ(parsed(R"({"prompt":[1],"repetition_penalty":1.3})").repetition_penalty, 1.3f);
  EXPECT_EQ(parsed(R"({"prompt":[1],"logit_bias":{"7":-100,"2":0.5}})").logit_bias,
            (std::vector<kernels::TokenBias>{{2, 0.5f}, {7, -100.0f}}));
  EXPECT_TRUE(parsed(R"({"prompt":[1],"logit_bias":{}})").logit_bias.empty());
  r = parsed(R"({"prompt":[1]})");
  EXPECT_EQ(r.repetition_penalty, 1.0f);
  EXPECT_EQ(r.min_p, 0.0f);
  EXPECT_EQ(r.presence_penalty, 0.0f);
  EXPECT_EQ(r.frequency_penalty, 0.0f);
  r = parsed(R"({"prompt":"hello"})");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].text, "hello");
  EXPECT_FALSE(r.max_tokens);  // decided once the text is encoded
  r = parsed(R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]})",
             Endpoint::ChatCompletions);
  EXPECT_EQ(r.messages[0]["content"], "a\nb");
}

TEST(CompletionRequest, ErrorsNameTheField) {
  const struct {
    const char* body;
    const char* param;
    const char* says;
  } cases[] = {
      {"{", "", "not valid JSON"},
      {"[1]", "", "must be a JSON object"},
      {R"({"prompt":[1],"x":1e400})", "", "range of a double"},
      {R"({})", "prompt", "required"},
      {R"({"prompt":[]})", "prompt", "empty"},
      {R"({"prompt":5})", "prompt", "got an integer"},
      {R"({"prompt":[1,"a"]})", "prompt", "prompt[1]"},
      {R"({"prompt":[1,100]})", "prompt", "not a token id"},
      {R"({"prompt":[1],"max_tokens":"x"})", "max_tokens", "must be an integer, got a string"},
      {R"({"prompt":[1],"max_tokens":0})", "max_tokens", "0 only with \"echo\": true"},
      {R"({"prompt":[1],"max_tokens":-1,"echo":true})", "max_tokens", "[0, "},
      {R"({"prompt":[1],"max_tokens":64})", "max_tokens", "maximum context length is 64"},
      {R"({"prompt":[1],"temperature":3})", "temperature", "[0, 2]"},
      {R"({"prompt":[1],"temperature":"hot"})", "temperature", "a number"},
      {R"({"prompt":[1],"top_p":0})", "top_p", "(0, 1]"},
      {R"({"prompt":[1],"n":0})", "n", "[1, 16]"},
      {R"({"prompt":[1],"n":17})", "n", "[1, 16]"},
      {R"({"prompt":[1],"n":2,"best_of":3})", "best_of", "must equal n (2)"},
      {R"({"prompt":[1],"best_of":2})", "best_of", "must equal n (1)"},
      {R"({"prompt":[1],"seed":1.5})", "seed", "an integer"},
      {R"({"prompt":[1],"stop":[1]})", "stop", "strings"},
      {R"({"prompt":[1],"stop_token_ids":[500]})", "stop_token_ids", "not a token id"},
      {R"({"prompt":[1],"stream":"yes"})", "stream", "a boolean"},
      {R"({"prompt":[1],"stream_options":{"include_usage":true}})", "stream_options", "only allowed"},
      {R"({"prompt":[1],"logprobs":21})", "logprobs", "[0, 20]"},
      {R"({"prompt":[1],"logprobs":-1})", "logprobs", "[0, 20]"},
      {R"({"prompt":[1],"logprobs":true})", "logprobs", "an integer"},
      {R"({"prompt":[1],"echo":"yes"})", "echo", "must be a boolean"},
      {R"({"prompt":[1],"prompt_logprobs":21})", "prompt_logprobs", "[0, 20]"},
      {R"({"prompt":[1],"prompt_logprobs":-1})", "prompt_logprobs", "[0, 20]"},
      {R"({"prompt":[1],"prompt_logprobs":1,"stream":true})", "prompt_logprobs", "`stream=True`"},
      {R"({"prompt":[1],"seed":18446744073709551615})", "seed", "[-9223372036854775808, 9223372036854775807]"},
      {R"({"prompt":[1],"response_format":"json"})", "response_format", "must be an object"},
      {R"({"prompt":[1],"response_format":{"type":"xml"}})", "response_format.type", "\"xml\""},
      {R"({"prompt":[1],"response_format":{"type":"json_schema"}})", "response_format.json_schema", "an object"},
      {R"({"prompt":[1],"response_format":{"type":"json_schema","json_schema":{"name":"n"}}})",
       "response_format.json_schema.schema", "is required"},
      {R"({"prompt":[1],"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"string","pattern":"a"}}}})",
       "response_format.json_schema.schema", "'pattern' is not supported"},
      {R"({"prompt":[1],"response_format":{"type":"json_schema","json_schema":{"schema":{"properties":{"a":{"format":"date"}}}}}})",
       "response_format.json_schema.schema", "at /properties/a: the keyword 'format'"},
      {R"({"prompt":[1],"response_format":{"type":"json_schema","json_schema":{"name":3,"schema":{}}}})",
       "response_format.json_schema.name", "a string"},
      {R"({"prompt":[1],"structured_outputs":{"regex":"a+"}})", "structured_outputs.regex", "not supported"},
      {R"({"prompt":[1],"structured_outputs":{"grammar":"root ::= x"}})", "structured_outputs.grammar", "not supported"},
      {R"({"prompt":[1],"structured_outputs":{"structural_tag":"{}"}})", "structured_outputs.structural_tag", "not supported"},
      {R"({"prompt":[1],"structured_outputs":{"choice":["a"],"json":{}}})", "structured_outputs", "exactly one"},
      {R"({"prompt":[1],"structured_outputs":{}})", "structured_outputs", "exactly one"},
      {R"({"prompt":[1],"structured_outputs":{"choice":[]}})", "structured_outputs.choice", "non-empty list"},
      {R"({"prompt":[1],"structured_outputs":{"choice":["a",""]}})", "structured_outputs.choice", "choice[1]"},
      {R"({"prompt":[1],"structured_outputs":{"json":"{not json"}})", "structured_outputs.json", "JSON schema"},
      {R"({"prompt":[1],"structured_outputs":{"json":{"type":"array","items":[{}]}}})", "structured_outputs.json", "tuple"},
      {R"({"prompt":[1],"structured_outputs":{"choice":["a"]},"response_format":{"type":"json_object"}})",
       "structured_outputs", "give one"},
      {R"({"prompt":[1],"tool_choice":"required"})", "tool_choice", "for chat completions"},
      {R"({"prompt":[1],"tools":[{"type":"function","function":{"name":"f"}}]})", "tools", "for chat completions"},
      {R"({"prompt":[1],"frequency_penalty":2.5})", "frequency_penalty", "[-2, 2]"},
      {R"({"prompt":[1],"presence_penalty":-3})", "presence_penalty", "[-2, 2]"},
      {R"({"prompt":[1],"presence_penalty":"x"})", "presence_penalty", "a number"},
      {R"({"prompt":[1],"min_p":1.5})", "min_p", "[0, 1]"},
      {R"({"prompt":[1],"repetition_penalty":0})", "repetition_penalty", "must lie in (0, "},
      {R"({"prompt":[1],"logit_bias":{"x":5}})", "logit_bias", "key 'x' is not a token id"},
      {R"({"prompt":[1],"logit_bias":{"100":5}})", "logit_bias", "0 to 99"},
      {R"({"prompt":[1],"logit_bias":{"-1":5}})", "logit_bias", "key '-1'"},
      {R"({"prompt":[1],"logit_bias":{"3":101}})", "logit_bias", "[-100, 100]"},
      {R"({"prompt":[1],"logit_bias":{"3":"up"}})", "logit_bias", "[-100, 100]"},
      {R"({"prompt":[1],"logit_bias":{"3":1,"03":2}})", "logit_bias", "token 3 twice"},
      {R"({"prompt":[1],"logit_bias":[1]})", "logit_bias", "an object"},
  };
  for (const auto& c : cases) {
    const ApiError e = error_of(c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_NE(e.message.find(c.says), std::string::npos) << c.body << " -> " << e.message;
  }
  EXPECT_EQ(error_of(R"({"model":"other","prompt":[1]})").status, 404);
  // Guided decoding parses into a grammar; a server that cannot do it (the sim, remote ranks)
  // refuses it with its reason.
  EXPECT_TRUE(parsed(R"({"prompt":[1],"response_format":{"type":"json_object"}})").grammar);
  EXPECT_EQ(parsed(R"({"prompt":[1],"response_format":{"type":"json_object"}})").guided_param, "response_format");
  EXPECT_TRUE(parsed(R"({"prompt":[1],"structured_outputs":{"choice":["a","b"],"regex":null}})").grammar);
  EXPECT_TRUE(parsed(R"({"prompt":[1],"structured_outputs":{"json":"{\"type\":\"integer\"}"}})").grammar);
  EXPECT_FALSE(parsed(R"({"prompt":[1],"response_format":{"type":"text"}})").grammar);
  ModelLimits sim = kLimits;
  sim.no_guided_reason = "the sim backend computes no logits to constrain";
  const ParsedRequest refused =
      parse_completion_request(R"({"prompt":[1],"structured_outputs":{"json_object":true}})", Endpoint::Completions, sim);
  ASSERT_TRUE(std::holds_alternative<ApiError>(refused));
  EXPECT_EQ(std::get<ApiError>(refused).param, "structured_outputs");
  EXPECT_NE(std::get<ApiError>(refused).message.find("sim backend"), std::string::npos);
  // Their neutral values are accepted: plain text, no tool to call.
  for (const char* neutral : {R"({"prompt":[1],"response_format":{"type":"text"}})", R"({"prompt":[1],"tool_choice":"none"})",
                              R"({"prompt":[1],"tool_choice":"auto","response_format":null})"})
    EXPECT_EQ(parsed(neutral, Endpoint::Completions).prompts.at(0).ids, std::vector<std::int32_t>{1}) << neutral;
  const auto logprobs_of = [](const std::string& body, Endpoint endpoint) { return parsed(body, endpoint).logprobs; };
  EXPECT_EQ(logprobs_of(R"({"prompt":[1]})", Endpoint::Completions), -1);
  EXPECT_EQ(logprobs_of(R"({"prompt":[1],"logprobs":0})", Endpoint::Completions), 0);
  EXPECT_EQ(logprobs_of(R"({"prompt":[1],"logprobs":20})", Endpoint::Completions), 20);
  const std::string chat = R"({"messages":[{"role":"user","content":"x"}])";
  EXPECT_EQ(logprobs_of(chat + "}", Endpoint::ChatCompletions), -1);
  EXPECT_EQ(logprobs_of(chat + R"(,"logprobs":false,"top_logprobs":0})", Endpoint::ChatCompletions), -1);
  EXPECT_EQ(logprobs_of(chat + R"(,"logprobs":true})", Endpoint::ChatCompletions), 0);
  EXPECT_EQ(logprobs_of(chat + R"(,"logprobs":true,"top_logprobs":5})", Endpoint::ChatCompletions), 5);
  std::string long_prompt = R"({"prompt":[)";
  for (int i = 0; i < 64; ++i) long_prompt += (i ? ",1" : "1");
  const ApiError e = error_of(long_prompt + "]}");
  EXPECT_EQ(e.param, "prompt");
  EXPECT_NE(e.message.find("64 tokens"), std::string::npos) << e.message;

  const ApiError m = error_of(R"({"messages":[{"content":"x"}]})", Endpoint::ChatCompletions);
  EXPECT_EQ(m.param, "messages[0].role");
  EXPECT_EQ(error_of(R"({"messages":[{"role":"user","content":7}]})", Endpoint::ChatCompletions).param,
            "messages[0].content");
  EXPECT_EQ(error_of(R"({"messages":[{"role":"user","content":"x"}],"logprobs":3})", Endpoint::ChatCompletions).param,
            "logprobs");
  EXPECT_EQ(error_of(R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21})",
                     Endpoint::ChatCompletions)
                .param,
            "top_logprobs");
  EXPECT_EQ(error_of(R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})", Endpoint::ChatCompletions).param,
            "top_logprobs");
}

// echo and prompt_logprobs: what the engine is asked to score, and the sim backend (no logits)
// refusing what it cannot compute, naming the field.
TEST(CompletionRequest, EchoAndPromptLogprobs) {
  CompletionRequest r = parsed(R"({"prompt":[1,2],"echo":true,"logprobs":3,"max_tokens":0})");
  EXPECT_TRUE(r.echo);
  EXPECT_EQ(r.max_tokens, 0);
  EXPECT_EQ(r.prompt_logprobs, -1);
  EXPECT_EQ(r.engine_prompt_logprobs(), 3) << "echo with logprobs scores the prompt";
  EXPECT_EQ(parsed(R"({"prompt":[1,2],"echo":true})").engine_prompt_logprobs(), -1) << "text alone needs no scores";
  EXPECT_EQ(parsed(R"({"prompt":[1,2],"logprobs":3})").engine_prompt_logprobs(), -1);
  r = parsed(R"({"prompt":[1,2],"echo":true,"logprobs":1,"prompt_logprobs":4})");
  EXPECT_EQ(r.prompt_logprobs, 4);
  EXPECT_EQ(r.engine_prompt_logprobs(), 4) << "the larger of the two";
  EXPECT_EQ(parsed(R"({"prompt":[1,2],"prompt_logprobs":0,"stream":true})").prompt_logprobs, 0) << "vLLM allows 0";

  // Chat has neither (vLLM's chat echo repeats the last message: not done here).
  EXPECT_EQ(error_of(R"({"messages":[{"role":"user","content":"x"}],"echo":true})", Endpoint::ChatCompletions).param,
            "echo");
  EXPECT_EQ(error_of(R"({"messages":[{"role":"user","content":"x"}],"prompt_logprobs":0})", Endpoint::ChatCompletions)
                .param,
            "prompt_logprobs");

  ModelLimits sim = kLimits;
  sim.logits = false;
  const auto sim_error = [&](const std::string& body) {
    ParsedRequest p = parse_completion_request(body, Endpoint::Completions, sim);
    EXPECT_TRUE(std::holds_alternative<ApiError>(p)) << body;
    return std::holds_alternative<ApiError>(p) ? std::get<ApiError>(p) : ApiError{};
  };
  ApiError e = sim_error(R"({"prompt":[1,2],"prompt_logprobs":1})");
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "prompt_logprobs");
  EXPECT_NE(e.message.find("sim"), std::string::npos) << e.message;
  e = sim_error(R"({"prompt":[1,2],"echo":true,"logprobs":0})");
  EXPECT_EQ(e.param, "echo");
  EXPECT_NE(e.message.find("no logits"), std::string::npos) << e.message;
  // What the sim can do stays allowed: echoed text, and logprobs without echo (null there).
  EXPECT_TRUE(std::holds_alternative<CompletionRequest>(
      parse_completion_request(R"({"prompt":[1,2],"echo":true,"max_tokens":0})", Endpoint::Completions, sim)));
  EXPECT_TRUE(std::holds_alternative<CompletionRequest>(
      parse_completion_request(R"({"prompt":[1,2],"logprobs":2})", Endpoint::Completions, sim)));
}

// OpenAI's batch forms: a list of strings or of lists of ids is several prompts, each with n
// choices; not both kinds in one list; each prompt checked on its own, its errors naming it.
TEST(CompletionRequest, ListsOfPrompts) {
  CompletionRequest r = parsed(R"({"prompt":[[1,2],[3],[4,5,6]],"n":2})");
  ASSERT_EQ(r.prompts.size(), 3u);
  EXPECT_TRUE(r.prompt_list);
  EXPECT_EQ(r.prompts[0].ids, (std::vector<std::int32_t>{1, 2}));
  EXPECT_EQ(r.prompts[1].ids, (std::vector<std::int32_t>{3}));
  EXPECT_EQ(r.prompts[2].ids, (std::vector<std::int32_t>{4, 5, 6}));
  EXPECT_EQ(r.n, 2);
  EXPECT_EQ(r.prompt_param(2), "prompt[2]");
  r = parsed(R"({"prompt":["a","bc"]})");
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.prompts[0].text, "a");
  EXPECT_EQ(r.prompts[1].text, "bc");
  EXPECT_TRUE(r.prompts[1].ids.empty());
  // A list of one is a list: its errors say prompt[0].
  r = parsed(R"({"prompt":[[7]]})");
  EXPECT_TRUE(r.prompt_list);
  EXPECT_EQ(r.prompt_param(0), "prompt[0]");
  EXPECT_EQ(parsed(R"({"prompt":[1,2]})").prompt_param(0), "prompt");
  EXPECT_EQ(parsed(R"({"messages":[{"role":"user","content":"x"}]})", Endpoint::ChatCompletions).prompt_param(0),
            "messages");
  // Each id prompt gets its own default budget: 16, or what the context leaves it.
  std::string long_ids = "[";
  for (int i = 0; i < 60; ++i) long_ids += (i ? ",1" : "1");
  long_ids += "]";
  r = parsed(R"({"prompt":[[1],)" + long_ids + "]}");
  EXPECT_EQ(std::get<std::int32_t>(completion_budget(r, 0, 1, kLimits)), 16);
  EXPECT_EQ(std::get<std::int32_t>(completion_budget(r, 1, 60, kLimits)), 4);
  // The bound: 256 choices (prompts × n).
  std::string many = R"({"prompt":[)";
  for (int i = 0; i < 128; ++i) many += (i ? ",[1]" : "[1]");
  EXPECT_EQ(parsed(many + R"(],"n":2})").prompts.size(), 128u);

  const struct {
    std::string body;
    const char* param;
    const char* says;
  } cases[] = {
      {R"({"prompt":[]})", "prompt", "'prompt' is empty"},
      {R"({"prompt":[[]]})", "prompt[0]", "'prompt[0]' is empty"},
      {R"({"prompt":["a",""]})", "prompt[1]", "'prompt[1]' is empty"},
      {R"({"prompt":[[1],[2],[]]})", "prompt[2]", "'prompt[2]' is empty"},
      {R"({"prompt":["a",[1]]})", "prompt[1]", "must be a string as 'prompt[0]' is, got an array"},
      {R"({"prompt":[[1],"a"]})", "prompt[1]", "must be a list of token ids as 'prompt[0]' is, got a string"},
      {R"({"prompt":[[1],2]})", "prompt[1]", "not both"},
      {R"({"prompt":[1,[2]]})", "prompt", "'prompt[1]' must be a token id"},
      {R"({"prompt":[[1],[2,"x"]]})", "prompt[1]", "'prompt[1][1]' must be a token id"},
      {R"({"prompt":[[1],[2,100]]})", "prompt[1]", "'prompt[1][1]' = 100 is not a token id"},
      {R"({"prompt":[[1],[2],[3],)" + long_ids.substr(0, long_ids.size() - 1) + ",1,1,1,1]]}", "prompt[3]",
       "prompt[3] has 64 tokens"},
      {R"({"prompt":[[1],)" + long_ids + R"(],"max_tokens":5})", "max_tokens", "(60 in prompt[1], 5 in the completion)"},
      {R"({"prompt":[{"a":1}]})", "prompt", "'prompt[0]' must be a token id"},
      {many + R"(],"n":3})", "prompt", "128 prompts and n is 3: 384 choices, more than the 256"},
      {many + ",[1]," + many.substr(11) + "]}", "prompt", "'prompt' holds 257 prompts: at most 256"},
  };
  for (const auto& c : cases) {
    const ApiError e = error_of(c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_NE(e.message.find(c.says), std::string::npos) << c.body << " -> " << e.message;
  }
}

// Chat's tool calling, as vLLM takes it: tools as its request model dumps them, tool_choice's
// default and rules, the tool-calling turns of a conversation (arguments parsed for the template).
ParsedRequest parse_chat(const std::string& fields, bool auto_tool_choice) {
  ModelLimits limits = kLimits;
  limits.auto_tool_choice = auto_tool_choice;
  return parse_completion_request(R"({"messages":[{"role":"user","content":"x"}])" + fields + "}",
                                  Endpoint::ChatCompletions, limits);
}

const std::string kTools = R"(,"tools":[{"function":{"parameters":{"type":"object","properties":{"b":{},"a":{}}},"name":"f","strict":true},"type":"function"},
                                        {"type":"function","function":{"name":"g","description":"G."}}])";

TEST(CompletionRequest, ToolsAsVllmPassesThemToTheTemplate) {
  const ParsedRequest p = parse_chat(kTools, true);
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(p)) << std::get<ApiError>(p).message;
  const CompletionRequest& r = std::get<CompletionRequest>(p);
  // Declared fields first (null when absent), then the others as given; a schema's own key order kept.
  EXPECT_EQ(r.tools.dump(),
            R"([{"type":"function","function":{"name":"f","description":null,"parameters":{"type":"object","properties":{"b":{},"a":{}}},"strict":true}},)"
            R"({"type":"function","function":{"name":"g","description":"G.","parameters":null}}])");
  using Read = CompletionRequest::ToolCallRead;
  EXPECT_EQ(r.tool_calls_read, Read::Hermes) << "tools given: tool_choice defaults to auto";
  EXPECT_EQ(std::get<CompletionRequest>(parse_chat(kTools + R"(,"tool_choice":"none")", true)).tool_calls_read, Read::None);
  EXPECT_EQ(std::get<CompletionRequest>(parse_chat(kTools + R"(,"tool_choice":"auto","parallel_tool_calls":false)", true))
                .tool_calls_read,
            Read::Hermes);
  // "none" renders the tools without the server flag (vLLM's), and no tools means nothing to parse.
  const ParsedRequest none = parse_chat(kTools + R"(,"tool_choice":"none")", false);
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(none));
  EXPECT_EQ(std::get<CompletionRequest>(none).tools.size(), 2u);
  EXPECT_EQ(std::get<CompletionRequest>(parse_chat("", true)).tool_calls_read, Read::None);
  EXPECT_TRUE(std::get<CompletionRequest>(parse_chat("", true)).tools.is_null());
  EXPECT_EQ(std::get<CompletionRequest>(parse_chat(R"(,"tools":[])", true)).tool_calls_read, Read::None);
  EXPECT_EQ(std::get<CompletionRequest>(parse_chat(R"(,"tools":[],"tool_choice":"required")", false)).tool_calls_read,
            Read::None)
      << "required with no tools is none (vLLM, OpenAI)";
}

// tool_choice naming a function or "required": the answer is guided by a grammar made from the
// tools (vLLM's schemas, forced_tool_calls.h), without --enable-auto-tool-choice, as vLLM.
TEST(CompletionRequest, NamedAndRequiredToolChoicesGuideTheAnswer) {
  using Read = CompletionRequest::ToolCallRead;
  const auto compiled = [](const std::string& schema) {
    auto g = structured::compile_schema(nlohmann::json::parse(schema));
    EXPECT_TRUE(g.ok()) << g.status().message();
    return *g;
  };
  const ParsedRequest named = parse_chat(kTools + R"(,"tool_choice":{"type":"function","function":{"name":"f"}})", false);
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(named)) << std::get<ApiError>(named).message;
  const CompletionRequest& f = std::get<CompletionRequest>(named);
  EXPECT_EQ(f.tool_calls_read, Read::Named);
  EXPECT_EQ(f.tool_choice_name, "f");
  EXPECT_EQ(f.guided_param, "tool_choice");
  ASSERT_TRUE(f.grammar);
  EXPECT_EQ(*f.grammar, *compiled(R"({"type":"object","properties":{"b":{},"a":{}}})"));
  // g has no parameters: its arguments are any object.
  const auto g = std::get<CompletionRequest>(parse_chat(kTools + R"(,"tool_choice":{"type":"function","function":{"name":"g"}})", false));
  EXPECT_EQ(*g.grammar, *compiled(R"({"type":"object"})"));
  const auto required = std::get<CompletionRequest>(parse_chat(kTools + R"(,"tool_choice":"required")", false));
  EXPECT_EQ(required.tool_calls_read, Read::Required);
  ASSERT_TRUE(required.grammar);
  EXPECT_EQ(*required.grammar, *compiled(R"({"type":"array","minItems":1,"items":{"anyOf":[
      {"type":"object","properties":{"name":{"enum":["f"]},"parameters":{"type":"object","properties":{"b":{},"a":{}}}},"required":["name","parameters"]},
      {"type":"object","properties":{"name":{"enum":["g"]},"parameters":{"type":"object","properties":{}}},"required":["name","parameters"]}]}})"));
  // A tool's $defs are gathered at the top, where its $ref finds them.
  const ParsedRequest refs = parse_chat(R"(,"tools":[{"type":"function","function":{"name":"p","parameters":{"$defs":{"pt":{"type":"object",
      "properties":{"x":{"type":"number"}}}},"type":"object","properties":{"at":{"$ref":"#/$defs/pt"}}}}},
      {"type":"function","function":{"name":"q","parameters":{"$defs":{"pt":{"type":"object","properties":{"x":{"type":"number"}}}},
      "type":"object","properties":{"to":{"$ref":"#/$defs/pt"}}}}}],"tool_choice":"required")", false);
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(refs)) << std::get<ApiError>(refs).message;
}

TEST(CompletionRequest, NamedAndRequiredToolChoiceErrorsNameTheField) {
  struct Case {
    std::string fields;
    std::string param, says;
  };
  const std::string named = R"(,"tool_choice":{"type":"function","function":{"name":"f"}})";
  const std::vector<Case> cases = {
      {kTools + named + R"(,"response_format":{"type":"json_object"})", "response_format", "both constrain the answer"},
      {kTools + R"(,"tool_choice":"required","structured_outputs":{"choice":["a"]})", "structured_outputs",
       "'structured_outputs' and 'tool_choice' (\"required\") both constrain the answer"},
      {R"(,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"d":{"type":"string","format":"date"}}}}}])" + named,
       "tools[0].function.parameters", "the keyword 'format' is not supported"},
      {R"(,"tools":[{"type":"function","function":{"name":"g"}},{"type":"function","function":{"name":"f","parameters":{"pattern":"x"}}}],"tool_choice":"required")",
       "tools[1].function.parameters", "'pattern'"},
      {R"(,"tools":[{"type":"function","function":{"name":"p","parameters":{"$defs":{"d":{"type":"string"}},"type":"object"}}},
          {"type":"function","function":{"name":"q","parameters":{"$defs":{"d":{"type":"number"}},"type":"object"}}}],"tool_choice":"required")",
       "tools", "Tool definition 'd' has multiple schemas"},
  };
  for (const Case& c : cases) {
    const ParsedRequest p = parse_chat(c.fields, false);
    ASSERT_TRUE(std::holds_alternative<ApiError>(p)) << c.fields;
    const ApiError& e = std::get<ApiError>(p);
    EXPECT_EQ(e.status, 400) << c.fields;
    EXPECT_EQ(e.param, c.param) << c.fields << " -> " << e.message;
    EXPECT_NE(e.message.find(c.says), std::string::npos) << c.fields << " -> " << e.message;
  }
  // A server that cannot guide refuses them, naming tool_choice.
  ModelLimits limits = kLimits;
  limits.no_guided_reason = "the sim backend has no logits";
  const ParsedRequest p = parse_completion_request(R"({"messages":[{"role":"user","content":"x"}])" + kTools + named + "}",
                                                   Endpoint::ChatCompletions, limits);
  ASSERT_TRUE(std::holds_alternative<ApiError>(p));
  EXPECT_EQ(std::get<ApiError>(p).param, "tool_choice");
  EXPECT_NE(std::get<ApiError>(p).message.find("no logits"), std::string::npos) << std::get<ApiError>(p).message;
}

TEST(CompletionRequest, ToolErrorsNameTheField) {
  struct Case {
    std::string fields;
    bool flag;
    std::string param, says;
  };
  const std::vector<Case> cases = {
      {kTools, false, "tool_choice", "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser"},
      {kTools + R"(,"tool_choice":"auto")", false, "tool_choice", "--enable-auto-tool-choice"},
      {kTools + R"(,"tool_choice":{"type":"function","function":{"name":"h"}})", true, "tool_choice",
       "Tool 'h' has not been passed in `tools`."},
      {kTools + R"(,"tool_choice":{"type":"function"})", true, "tool_choice", "{\"name\": ...}"},
      {kTools + R"(,"tool_choice":"maybe")", true, "tool_choice", "must be \"none\", \"auto\""},
      {kTools + R"(,"tool_choice":3)", true, "tool_choice", "got an integer"},
      {R"(,"tool_choice":"auto")", true, "tool_choice", "When using `tool_choice`, `tools` must be set."},
      {R"(,"tools":{"type":"function"})", true, "tools", "must be a list"},
      {R"(,"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"g"}},{"type":"function","function":{"description":"x"}}])",
       true, "tools[2].function.name", "'tools[2].function.name' must be a non-empty string"},
      {R"(,"tools":[{"type":"function","function":{"name":""}}])", true, "tools[0].function.name", "non-empty"},
      {R"(,"tools":[{"type":"retrieval","function":{"name":"f"}}])", true, "tools[0].type", "\"function\""},
      {R"(,"tools":[{"type":"function"}])", true, "tools[0].function", "must be an object"},
      {R"(,"tools":["f"])", true, "tools[0]", "got a string"},
      {R"(,"tools":[{"function":{"name":"f","description":1}}])", true, "tools[0].function.description", "a string"},
      {R"(,"tools":[{"function":{"name":"f","parameters":[]}}])", true, "tools[0].function.parameters", "JSON Schema"},
      {kTools + R"(,"parallel_tool_calls":"yes")", true, "parallel_tool_calls", "a boolean"},
      // Bounded before anything copies or renders them recursively.
      {R"(,"tools":[{"function":{"name":"f","parameters":{"a":)" + std::string(100000, '[') + std::string(100000, ']') + "}}}]",
       true, "tools", "nests deeper than 256 levels"},
  };
  for (const Case& c : cases) {
    const ParsedRequest p = parse_chat(c.fields, c.flag);
    ASSERT_TRUE(std::holds_alternative<ApiError>(p)) << c.fields;
    const ApiError& e = std::get<ApiError>(p);
    EXPECT_EQ(e.status, 400) << c.fields;
    EXPECT_EQ(e.param, c.param) << c.fields << " -> " << e.message;
    EXPECT_NE(e.message.find(c.says), std::string::npos) << c.fields << " -> " << e.message;
  }
}

// vLLM's chat fields for continuing a reply the client began: both default to a new reply.
TEST(CompletionRequest, ContinueFinalMessageExcludesTheGenerationPrompt) {
  const ParsedRequest plain = parse_chat("", false);
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(plain));
  EXPECT_TRUE(std::get<CompletionRequest>(plain).add_generation_prompt);
  EXPECT_FALSE(std::get<CompletionRequest>(plain).continue_final_message);
  const ParsedRequest cont = parse_chat(R"(,"add_generation_prompt":false,"continue_final_message":true)", false);
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(cont));
  EXPECT_FALSE(std::get<CompletionRequest>(cont).add_generation_prompt);
  EXPECT_TRUE(std::get<CompletionRequest>(cont).continue_final_message);
  for (const char* fields : {R"(,"continue_final_message":true)", R"(,"continue_final_message":"yes")",
                             R"(,"add_generation_prompt":1)"}) {
    const ParsedRequest p = parse_chat(fields, false);
    ASSERT_TRUE(std::holds_alternative<ApiError>(p)) << fields;
    const std::string param = std::get<ApiError>(p).param;
    EXPECT_TRUE(param == "continue_final_message" || param == "add_generation_prompt") << fields << " " << param;
  }
  const ParsedRequest both = parse_chat(R"(,"continue_final_message":true)", false);
  EXPECT_NE(std::get<ApiError>(both).message.find("Cannot set both"), std::string::npos);
}

TEST(CompletionRequest, ToolCallingTurnsOfAConversation) {
  const std::string body = R"({"messages":[
      {"role":"user","content":"Weather?"},
      {"role":"assistant","content":null,"tool_calls":[
          {"id":"call_1","type":"function","function":{"name":"w","arguments":"{\"city\": \"Paris\", \"a\": [1, 2]}"}},
          {"id":"call_2","type":"function","function":{"name":"v","arguments":""}},
          {"id":"call_3","type":"function","function":{"name":"u","arguments":{"k":1}}}]},
      {"role":"tool","tool_call_id":"call_1","content":"sunny"}]})";
  const ParsedRequest p = parse_completion_request(body, Endpoint::ChatCompletions, kLimits);
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(p)) << std::get<ApiError>(p).message;
  // vLLM's: content null reads "", arguments' JSON text becomes its value (key order kept),
  // empty arguments {}, the tool answer keeps its tool_call_id.
  EXPECT_EQ(std::get<CompletionRequest>(p).messages.dump(),
            R"([{"role":"user","content":"Weather?"},)"
            R"({"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function","function":{"name":"w","arguments":{"city":"Paris","a":[1,2]}}},)"
            R"({"id":"call_2","type":"function","function":{"name":"v","arguments":{}}},)"
            R"({"id":"call_3","type":"function","function":{"name":"u","arguments":{"k":1}}}]},)"
            R"({"role":"tool","content":"sunny","tool_call_id":"call_1"}])");
  const auto error = [](const std::string& messages) {
    const ParsedRequest q =
        parse_completion_request(R"({"messages":[{"role":"user","content":"x"},)" + messages + "]}", Endpoint::ChatCompletions, kLimits);
    return std::holds_alternative<ApiError>(q) ? std::get<ApiError>(q) : ApiError{};
  };
  ApiError e = error(R"({"role":"assistant","tool_calls":[{"function":{"name":"w","arguments":"{\"city\": "}}]})");
  EXPECT_EQ(e.param, "messages[1].tool_calls[0].function.arguments");
  EXPECT_NE(e.message.find("must be JSON text"), std::string::npos) << e.message;
  EXPECT_EQ(error(R"({"role":"assistant","tool_calls":[{"function":{"arguments":"{}"}}]})").param,
            "messages[1].tool_calls[0].function.name");
  EXPECT_EQ(error(R"({"role":"assistant","tool_calls":[{"type":"function"}]})").param, "messages[1].tool_calls[0].function");
  EXPECT_EQ(error(R"({"role":"assistant","tool_calls":{}})").param, "messages[1].tool_calls");
  EXPECT_EQ(error(R"({"role":"assistant","tool_calls":[{"function":{"name":"w","arguments":5}}]})").param,
            "messages[1].tool_calls[0].function.arguments");
  EXPECT_EQ(error(R"({"role":"tool","tool_call_id":5,"content":"x"})").param, "messages[1].tool_call_id");
  // An empty list of calls is dropped (vLLM's), and only an assistant's calls are kept.
  const ParsedRequest empty = parse_completion_request(
      R"({"messages":[{"role":"user","content":"x","tool_calls":[{"function":{"name":"w"}}]},{"role":"assistant","content":"y","tool_calls":[]}]})",
      Endpoint::ChatCompletions, kLimits);
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(empty));
  EXPECT_EQ(std::get<CompletionRequest>(empty).messages.dump(),
            R"([{"role":"user","content":"x"},{"role":"assistant","content":"y"}])");
  const std::string deep = std::string(300, '[') + std::string(300, ']');
  EXPECT_EQ(error(R"({"role":"assistant","tool_calls":[{"function":{"name":"w","arguments":")" + deep + R"("}}]})").param,
            "messages[1].tool_calls[0].function.arguments");
  EXPECT_EQ(error(R"({"role":"assistant","tool_calls":[{"function":{"name":"w","arguments":)" + deep + "}}]}").param,
            "messages[1].tool_calls");
}

}  // namespace
}  // namespace sy::http
