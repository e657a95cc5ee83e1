mod errors;
mod parts;
mod redaction;
