-- Update ids a channel source (a Telegram bot) has accepted, written in the same transaction as the pending turn
-- each carries: a redelivered update is recognised and skipped, and polling resumes after the highest one.
-- Only the latest 10,000 ids per source are kept: a redelivery concerns the most recent updates only.
CREATE TABLE IF NOT EXISTS channel_updates (
    source      TEXT    NOT NULL,
    update_id   INTEGER NOT NULL,
    accepted_at TEXT    NOT NULL,
    PRIMARY KEY (source, update_id)
);
