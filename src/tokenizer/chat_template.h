// Chat prompts for the two instruct formats, byte-exact with the models' Jinja templates
// (reference §1.4 LLaDA-8B-Instruct, §2.4 Dream-Instruct / Qwen2.5). Tokenize the result with
// allow_special=true; it already holds the BOS where the template has one.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "io/model_config.h"

namespace dllmq {

class Tokenizer;

enum class ChatFormat { kLLaDA, kQwen };

// One message of a conversation (role: "system", "user" or "assistant").
struct ChatMessage {
  std::string role;
  std::string content;
};

// A conversation (the templates' `messages` loop), ending with the assistant header.
//  kLLaDA: BOS, then "<|start_header_id|>{role}<|end_header_id|>\n\n{content|trim}<|eot_id|>" per
//          message, then the assistant header.
//  kQwen:  the first message if it is a system one, else the default system turn; then
//          "<|im_start|>{role}\n{content}<|im_end|>\n" per remaining message, then
//          "<|im_start|>assistant\n".
std::string render_chat(ChatFormat format, std::span<const ChatMessage> messages);

// One user turn (plus an optional system turn), ending with the assistant header.
//  kLLaDA: "<|startoftext|><|start_header_id|>user<|end_header_id|>\n\n{user|trim}<|eot_id|>"
//          "<|start_header_id|>assistant<|end_header_id|>\n\n" (system turn first when given; BOS
//          once)
//  kQwen:  "<|im_start|>system\n{system or 'You are a helpful assistant.'}<|im_end|>\n"
//          "<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"
std::string render_chat(ChatFormat format, std::string_view user,
                        std::optional<std::string_view> system = {});

// LLaDA -> kLLaDA, Dream -> kQwen.
ChatFormat chat_format_for(Arch arch);
// From the tokenizer's specials: <|start_header_id|> -> kLLaDA, <|im_start|> -> kQwen, else
// nullopt.
std::optional<ChatFormat> chat_format_for(const Tokenizer& tok);

const char* chat_format_name(ChatFormat f);

}  // namespace dllmq
