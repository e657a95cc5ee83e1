-- The size of a chat's context as the model's provider counted it: on the last row a turn stored, the tokens
-- of that turn's last request and its answer. The next turn starts from it instead of counting the history
-- again with a tokenizer (which costs a process tens of MiB). NULL when unknown: the provider reported no
-- usage, or the request carried less than the whole history.
ALTER TABLE messages ADD COLUMN context_tokens INTEGER;
