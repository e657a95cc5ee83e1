-- The answer of a finished turn, kept with its pending row until the channel confirms it reached the user
-- (channels that confirm delivery only, such as Telegram): a crash or a stop before then sends it at the next
-- start instead of losing it, and the turn does not run again.
ALTER TABLE pending_turns ADD COLUMN answer_json TEXT;
