mod parts;
mod redaction;
