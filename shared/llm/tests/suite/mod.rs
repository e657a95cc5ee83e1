mod anthropic;
mod errors;
mod gemini;
mod openrouter;
mod parts;
mod redaction;
mod responses;
mod streaming;
