-- Debounce by key (issue 43, docket_core::debounce): the key a task was enqueued with (kept
-- after it ran, for the task page) and the latest run_at a replacing enqueue may give it (the
-- first enqueue + max_wait).
ALTER TABLE docket_tasks ADD COLUMN debounce_key text, ADD COLUMN debounce_until timestamptz;
-- One waiting task per key: scheduled or available and never claimed (every claim sets
-- attempted_at and nothing clears it, so a task released or retried stays out). As with
-- unique_key (0021), the index is slot 0's: a debounced task is inserted scheduled (so into
-- slot 0) and promotion keeps a task with a debounce_key there; the ring slots refuse one.
CREATE UNIQUE INDEX docket_tasks_debounce_idx ON docket_tasks_live_0 (debounce_key)
    WHERE debounce_key IS NOT NULL AND state IN ('scheduled', 'available')
    AND attempted_at IS NULL;
ALTER TABLE docket_tasks_live_1 ADD CONSTRAINT docket_tasks_live_1_no_debounce CHECK (debounce_key IS NULL);
ALTER TABLE docket_tasks_live_2 ADD CONSTRAINT docket_tasks_live_2_no_debounce CHECK (debounce_key IS NULL);
ALTER TABLE docket_tasks_live_3 ADD CONSTRAINT docket_tasks_live_3_no_debounce CHECK (debounce_key IS NULL);
ALTER TABLE docket_tasks_live_4 ADD CONSTRAINT docket_tasks_live_4_no_debounce CHECK (debounce_key IS NULL);
-- Dead-letter queues (issue 43, docket_core::dead_letter): a queue's dead_letter queue, and on
-- a dead letter the task it stands for with that task's errors (JSON, docket_core's
-- DeadLetterOf).
ALTER TABLE docket_queues ADD COLUMN dead_letter text;
ALTER TABLE docket_tasks ADD COLUMN dead_letter_of jsonb;
-- Tags (issue 43): a JSON array of strings, NULL for none; found by containment through a GIN
-- index (`tags @> '["customer:42"]'`), which every partition gets.
ALTER TABLE docket_tasks ADD COLUMN tags jsonb;
CREATE INDEX docket_tasks_tags_idx ON docket_tasks USING gin (tags jsonb_path_ops)
    WHERE tags IS NOT NULL;
-- Worker labels (issue 43, docket_core::labels): what a task requires and prefers of a
-- claim's labels and for how long, one JSON object (docket_core's Affinity), NULL for none.
-- Claims test it in the row (`affinity IS NULL OR …`), so a queue without affinity claims as
-- before.
ALTER TABLE docket_tasks ADD COLUMN affinity jsonb;
