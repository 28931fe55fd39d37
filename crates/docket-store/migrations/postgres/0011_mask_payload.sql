-- Queue setting mask_payload: payloads, results and progress of the queue's tasks are hidden
-- from read-only tokens and the dashboard (README "Security").
ALTER TABLE docket_queues ADD COLUMN mask_payload boolean NOT NULL DEFAULT false;
